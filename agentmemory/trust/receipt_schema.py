"""What the initial migration creates on PostgreSQL for receipts: the counter a receipt
checks, the function that files one, and its column's compression.

A receipt is one statement (`agentmemory.trust.receipts`): it counts the entries it shows
in its snapshot and locks the thread row. An erasure that held that lock while the
receipt waited deletes rows the snapshot still sees; the locked row is re-read once the
lock is granted, so the statement compares the ``erasures`` it reads there with the one
its snapshot saw, and writes nothing when they differ. A trigger advances the counter
for every DELETE of entries, through the services or not, once per statement. SQLite
needs neither: a write statement holds the database's write lock from its start, so its
count sees every commit before it.

When the recall's load read ``erasures`` in the statement that read its entries
(`pipeline.rows.read_context`), the function is given it: unchanged under the row lock,
no entry of the thread was deleted since the load, so nothing needs counting (at 3,310
entries shown the count took about 2 ms). When it moved (an erasure of any entry of the
thread, shown or not), the counting statement decides, in the same call.

The statement runs inside a PL/pgSQL function, which keeps its plan for the session:
planning it was a fifth of a receipt's time. What a receipt shows is compressed with lz4
where the server was built with it. Its parameters are the receipt's columns
as `receipts.receipt_columns` lists them (a test holds the two to each other); a
migration that changes those columns replaces the function too.
"""

from __future__ import annotations

THREAD_TABLE = "agentmemory_thread"
ENTRY_TABLE = "agentmemory_memoryentry"
RECEIPT_TABLE = "agentmemory_recallreceipt"
TRIGGER = "agentmemory_entry_erasures"
FILE_RECEIPT = "agentmemory_file_receipt"

#: The receipt's columns the function takes, in order, with their types.
RECEIPT_COLUMNS = [
    ("thread_id", "bigint"), ("budget_tokens", "integer"), ("tokens", "integer"),
    ("decline", "varchar"), ("budget_decline", "varchar"), ("omitted", "integer"),
    ("omitted_reason", "varchar"), ("folded_summary_id", "bigint"), ("config", "jsonb"),
    ("shown", "jsonb"), ("oldest_position", "bigint"), ("newest_position", "bigint"),
    ("summary_loads", "integer"),
    ("saved_tokens", "integer"), ("created_at", "timestamptz"),
    ("expires_at", "timestamptz"),
]
_columns = ", ".join(name for name, _ in RECEIPT_COLUMNS)
_arguments = ", ".join(f"new_{name} {kind}" for name, kind in RECEIPT_COLUMNS)
_values = ", ".join(f"new_{name}" for name, _ in RECEIPT_COLUMNS)
#: The receipt from the thread's row (both of the function's statements), and its lock.
_INSERT = (f"INSERT INTO {RECEIPT_TABLE} ({_columns}, turn)"
           f" SELECT {_values}, locked.last_turn FROM {THREAD_TABLE} locked"
           f" WHERE locked.id = new_thread_id")
_LOCKED = "FOR UPDATE OF locked RETURNING id, turn INTO receipt_id, receipt_turn"

CREATE_STATEMENTS = [
    f"""CREATE FUNCTION {TRIGGER}() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE {THREAD_TABLE} SET erasures = erasures + 1
    WHERE id IN (SELECT DISTINCT thread_id FROM erased);
    RETURN NULL;
END $$""",
    f"CREATE TRIGGER {TRIGGER} AFTER DELETE ON {ENTRY_TABLE} REFERENCING OLD TABLE AS erased"
    f" FOR EACH STATEMENT EXECUTE FUNCTION {TRIGGER}()",
    f"""CREATE FUNCTION {FILE_RECEIPT}({_arguments}, shown_ids text, shown_count integer,
    seen_erasures bigint, OUT receipt_id bigint, OUT receipt_turn integer)
    LANGUAGE plpgsql AS $$
BEGIN
    IF seen_erasures IS NOT NULL THEN
        -- The load read the thread's erasures as it read the entries: unchanged under
        -- the row lock, no entry of the thread was deleted since, so all it showed are
        -- stored, and none need counting.
        {_INSERT} AND locked.erasures = seen_erasures
        {_LOCKED};
        IF receipt_id IS NOT NULL THEN
            RETURN;
        END IF;
    END IF;
    {_INSERT}
      AND locked.erasures = (SELECT seen.erasures FROM {THREAD_TABLE} seen
                             WHERE seen.id = new_thread_id)
      AND (SELECT COUNT(*) FROM {ENTRY_TABLE} entry
           WHERE entry.id = ANY(string_to_array(shown_ids, ',')::bigint[])) = shown_count
    {_LOCKED};
END $$""",
    # What a receipt shows is compressed with lz4 where the server has it: at 3,310 entries
    # shown a receipt took 1 ms less than with the default (pglz), its column 1.6 times
    # the size (measured once, on the benchmark machine).
    f"""DO $$ BEGIN
    ALTER TABLE {RECEIPT_TABLE} ALTER COLUMN shown SET COMPRESSION lz4;
EXCEPTION WHEN feature_not_supported OR invalid_parameter_value THEN
    NULL;  -- a server built without lz4 keeps its default
END $$""",
]
DROP_STATEMENTS = [f"DROP FUNCTION IF EXISTS {FILE_RECEIPT}",
                   f"DROP TRIGGER IF EXISTS {TRIGGER} ON {ENTRY_TABLE}",
                   f"DROP FUNCTION IF EXISTS {TRIGGER}()"]

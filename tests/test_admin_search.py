"""The entries admin searches messages through the search index (issue 23, item 4).

Words find messages as `services.search` finds them (stemmed, in every thread), a
covered original only for those who may read it (the owner, or a user granted
``agentmemory.expand_summary``), and Django's own search still finds ids, names and
summaries' text. Query text the index cannot take is no error.
"""

from __future__ import annotations

from datetime import timedelta
from urllib.parse import urlencode

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from agentmemory import services
from agentmemory.models import MemoryEntry, Thread
from tests.admin_fixtures import ORIGINAL, VIEW_PERMISSIONS, Folded, logged_in, make_user

pytestmark = pytest.mark.django_db


def found(client: Client, term: str) -> set[int]:
    """The ids the entries changelist lists for the search ``term``."""
    url = reverse("admin:agentmemory_memoryentry_changelist")
    response = client.get(f"{url}?{urlencode({'q': term})}")
    assert response.status_code == 200, (term, response.status_code)
    return {row.pk for row in response.context["cl"].result_list}


def message(thread: Thread, needle: str) -> MemoryEntry:
    return MemoryEntry.objects.get(thread=thread, content__contains=needle)


def test_words_find_messages_through_the_index_in_every_thread(viewer: Client) -> None:
    folded = Folded()
    other = Thread.objects.create(owner=get_user_model().objects.create_user("bob"))
    theirs = services.append(other, [{"role": "user", "content": "Bob's parcel arrives by DHL."}])
    answer = message(folded.thread, "Order 9 is in transit with DHL")
    # "arriving" is in no message: the index matches "arrive" and "arrives" by their stem.
    assert found(viewer, "arriving DHL 9") == {answer.pk}
    assert found(viewer, "DHL arriving bob") == {theirs[0].pk}


def test_a_covered_original_is_found_only_by_those_who_may_read_it(
    viewer: Client, expander: Client
) -> None:
    owner = make_user("owner", *VIEW_PERMISSIONS)
    folded = Folded(owner=owner)
    words = "Leipzig courier QUOKKA"
    assert ORIGINAL.startswith("Order 1 left the Leipzig depot")
    assert found(expander, words) == {folded.original.pk}
    assert found(logged_in(owner), words) == {folded.original.pk}  # the owner's own thread
    assert found(viewer, words) == set()
    # Live text is found by anyone who may view entries.
    live = message(folded.thread, "Order 9 is in transit")
    assert live.pk in found(viewer, "transit DHL 9")


def test_ids_names_and_summaries_keep_djangos_search(viewer: Client) -> None:
    folded = Folded()
    result = MemoryEntry.objects.get(thread=folded.thread, tool_call_id="call-9")
    assert found(viewer, "call-9") == {result.pk}
    assert folded.outer.summary_key
    assert folded.outer.pk in found(viewer, folded.outer.summary_key)
    # A summary's own words: the index holds no summary, Django's search reads its text.
    words = folded.outer.content.split("\n", 1)[1].splitlines()[0][-20:]
    assert folded.outer.pk in found(viewer, words)
    assert folded.inner.pk not in found(viewer, words)  # covered: its text is withheld


@pytest.mark.parametrize("term", ['"Leipzig', "*", "-", "( )", '"', "\x07", "a" * 600])
def test_text_the_index_cannot_take_is_no_error(expander: Client, term: str) -> None:
    Folded()
    assert found(expander, term) <= set(MemoryEntry.objects.values_list("pk", flat=True))


def test_an_expired_message_is_not_found_by_its_words(viewer: Client) -> None:
    thread = Thread.objects.create(ttl=timedelta(days=1))
    old, = services.append(thread, [{"role": "user", "content": "An expired zeppelin."}],
                           now=timezone.now() - timedelta(days=2))
    live, = services.append(thread, [{"role": "user", "content": "A live zeppelin."}])
    assert found(viewer, "zeppelin") == {live.pk}
    assert MemoryEntry.objects.filter(pk=old.pk).exists()  # not purged, only invisible


def test_without_view_permission_the_search_is_refused(viewer: Client) -> None:
    Folded()
    outsider = logged_in(make_user("outsider"))
    url = reverse("admin:agentmemory_memoryentry_changelist")
    assert outsider.get(f"{url}?q=Leipzig").status_code == 403


def test_the_search_makes_the_same_queries_for_few_hits_and_many(viewer: Client) -> None:
    thread = Thread.objects.create(title="many")
    services.append(thread, [{"role": "user", "content": "One zeppelin."}])
    url = reverse("admin:agentmemory_memoryentry_changelist")
    counts = []
    for more in (0, 60):
        services.append(thread, [{"role": "user", "content": f"Zeppelin {n}."}
                                 for n in range(more)])
        with CaptureQueriesContext(connection) as captured:
            assert viewer.get(f"{url}?q=zeppelin").status_code == 200
        counts.append(len(captured.captured_queries))
    assert counts[0] == counts[1], counts

"""Window spans record what they were made from (SpanSource), for erasure by derivation.

Spans folded before this migration are linked by what can be proven: a span that kept
its messages gets one source row per message (its digest, and every entry of the
thread that is that exact message). A span folded under ``discard`` kept nothing to
prove it by: it is marked ``derivation_unknown``, and erasing or purging any entry of
its thread deletes it.
"""

import hashlib
import json

import django.db.models.deletion
from django.db import migrations, models


def digest(role, content, tool_calls, tool_call_id):
    # A frozen copy of agentmemory.window.frame.message_digest: a migration must not
    # change meaning when the code does.
    payload = json.dumps([role, content, list(tool_calls), tool_call_id], sort_keys=True)
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


def link_existing_spans(apps, schema_editor):
    FoldedSpan = apps.get_model("agentmemory", "FoldedSpan")
    MemoryEntry = apps.get_model("agentmemory", "MemoryEntry")
    SpanSource = apps.get_model("agentmemory", "SpanSource")
    FoldedSpan.objects.filter(messages__isnull=True).update(derivation_unknown=True)
    for span in FoldedSpan.objects.filter(messages__isnull=False).iterator(chunk_size=200):
        messages = [m for m in span.messages or [] if isinstance(m, dict)]
        if len(messages) != len(span.messages or []):
            FoldedSpan.objects.filter(pk=span.pk).update(derivation_unknown=True)
            continue
        entries = {}
        candidates = MemoryEntry.objects.filter(
            thread_id=span.thread_id, content__in={m.get("content", "") for m in messages}
        )
        for entry in candidates:
            key = digest(entry.role, entry.content, entry.tool_calls, entry.tool_call_id)
            entries.setdefault(key, []).append(entry.pk)
        rows = []
        for position, message in enumerate(messages):
            key = digest(
                message.get("role", ""),
                message.get("content", ""),
                message.get("tool_calls") or [],
                message.get("tool_call_id") or "",
            )
            for entry_id in entries.get(key) or [None]:
                rows.append(
                    SpanSource(span_id=span.pk, position=position, entry_id=entry_id, digest=key)
                )
        SpanSource.objects.bulk_create(rows)


class Migration(migrations.Migration):

    dependencies = [
        ('agentmemory', '0003_entry_order_by_id'),
    ]

    operations = [
        migrations.AddField(
            model_name='foldedspan',
            name='derivation_unknown',
            field=models.BooleanField(default=False, editable=False, help_text='Folded before derivation was recorded, without its messages: nothing proves which entries it stands for, so erasing or purging any entry of its thread deletes it.'),
        ),
        migrations.CreateModel(
            name='SpanSource',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('position', models.PositiveIntegerField(help_text="The message's place in the folded span.")),
                ('digest', models.CharField(help_text='Hash of role, content and tool fields.', max_length=64)),
                ('entry', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='agentmemory.memoryentry')),
                ('span', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='sources', to='agentmemory.foldedspan')),
            ],
            options={
                'ordering': ['span', 'position', 'id'],
                'indexes': [models.Index(fields=['digest'], name='agentmemory_span_source_digest')],
            },
        ),
        migrations.RunPython(link_existing_spans, migrations.RunPython.noop),
    ]

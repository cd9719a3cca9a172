"""Mount with ``path("api/memory/", include("agentmemory.api.urls"))``."""

from django.urls import path, re_path

from agentmemory.api.views import (
    entries,
    recall,
    schema,
    search,
    spans,
    summaries,
    threads,
    usage,
)

app_name = "agentmemory-api"

thread = "threads/<int:thread_id>/"
summary = f"{thread}summaries/<int:summary_id>/"

urlpatterns = [
    path("threads/", threads.ThreadList.as_view(), name="thread-list"),
    path(thread, threads.ThreadDetail.as_view(), name="thread-detail"),
    path(f"{thread}entries/", entries.EntryList.as_view(), name="entry-list"),
    path(f"{thread}entries/<int:entry_id>/", entries.EntryDetail.as_view(),
         name="entry-detail"),
    path(f"{thread}recall/", recall.Recall.as_view(), name="recall"),
    path(f"{thread}fold/", recall.Fold.as_view(), name="fold"),
    path(f"{thread}summaries/", summaries.SummaryList.as_view(), name="summary-list"),
    path(summary, summaries.SummaryDetail.as_view(), name="summary-detail"),
    path(f"{summary}originals/", summaries.SummaryOriginals.as_view(),
         name="summary-originals"),
    path(f"{thread}compact/", spans.Compact.as_view(), name="compact"),
    path(f"{thread}folds/", spans.FoldList.as_view(), name="fold-list"),
    path(f"{thread}folds/lookup/", spans.FoldLookup.as_view(), name="fold-lookup"),
    path(f"{thread}usage/", usage.Usage.as_view(), name="usage"),
    path(f"{thread}recalls/", usage.ReceiptList.as_view(), name="receipt-list"),
    path(f"{thread}recalls/<int:receipt_id>/", usage.ReceiptDetail.as_view(),
         name="receipt-detail"),
    path(f"{thread}savings/", usage.ThreadSavings.as_view(), name="thread-savings"),
    path("savings/", usage.OwnerSavings.as_view(), name="owner-savings"),
    path(f"{thread}search/", search.ThreadSearch.as_view(), name="thread-search"),
    path("search/", search.OwnerSearch.as_view(), name="owner-search"),
    path("schema/", schema.MemorySchemaView.as_view(), name="schema"),
    re_path(r"", schema.UnknownPath.as_view(), name="unknown-path"),
]

"""Mount with ``path("api/memory/", include("agentmemory.api.urls"))``."""

from django.urls import path, re_path

from agentmemory.api import views

app_name = "agentmemory-api"

thread = "threads/<int:thread_id>/"
summary = f"{thread}summaries/<int:summary_id>/"

urlpatterns = [
    path("threads/", views.ThreadList.as_view(), name="thread-list"),
    path(thread, views.ThreadDetail.as_view(), name="thread-detail"),
    path(f"{thread}entries/", views.EntryList.as_view(), name="entry-list"),
    path(f"{thread}entries/<int:entry_id>/", views.EntryDetail.as_view(), name="entry-detail"),
    path(f"{thread}recall/", views.Recall.as_view(), name="recall"),
    path(f"{thread}fold/", views.Fold.as_view(), name="fold"),
    path(f"{thread}summaries/", views.SummaryList.as_view(), name="summary-list"),
    path(summary, views.SummaryDetail.as_view(), name="summary-detail"),
    path(f"{summary}originals/", views.SummaryOriginals.as_view(), name="summary-originals"),
    path(f"{thread}compact/", views.Compact.as_view(), name="compact"),
    path(f"{thread}folds/", views.FoldList.as_view(), name="fold-list"),
    path(f"{thread}folds/lookup/", views.FoldLookup.as_view(), name="fold-lookup"),
    path(f"{thread}usage/", views.Usage.as_view(), name="usage"),
    path(f"{thread}recalls/", views.ReceiptList.as_view(), name="receipt-list"),
    path(f"{thread}recalls/<int:receipt_id>/", views.ReceiptDetail.as_view(),
         name="receipt-detail"),
    path(f"{thread}savings/", views.ThreadSavings.as_view(), name="thread-savings"),
    path("savings/", views.OwnerSavings.as_view(), name="owner-savings"),
    path(f"{thread}search/", views.ThreadSearch.as_view(), name="thread-search"),
    path("search/", views.OwnerSearch.as_view(), name="owner-search"),
    path("schema/", views.MemorySchemaView.as_view(), name="schema"),
    re_path(r"", views.UnknownPath.as_view(), name="unknown-path"),
]

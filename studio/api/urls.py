"""The JSON API, version 1, mounted at /api/v1/ (every route is in openapi.py too)."""
from django.urls import path, re_path

from studio.api import views
from studio.api import views_chapters, views_portable

app_name = "api"

urlpatterns = [
    path("openapi.json", views.openapi_document, name="openapi"),
    path("me", views.me, name="me"),
    path("universes", views.universe_list, name="universe_list"),
    path("saves", views.save_collection, name="save_collection"),
    path("saves/<str:save_id>", views.save_detail, name="save_detail"),
    path("saves/<str:save_id>/turns", views.turn_collection, name="turn_collection"),
    path("saves/<str:save_id>/turns/<int:turn_id>", views.turn_detail, name="turn_detail"),
    path("saves/<str:save_id>/facts", views.fact_list, name="fact_list"),
    path("saves/<str:save_id>/beliefs", views.belief_list, name="belief_list"),
    path("saves/<str:save_id>/mental-models", views.mental_model_list, name="mental_model_list"),
    path("saves/<str:save_id>/query", views.memory_query, name="memory_query"),
    path("saves/<str:save_id>/context", views.memory_context, name="memory_context"),
    path("saves/<str:save_id>/narrate", views.narrate, name="narrate"),
    path("saves/<str:save_id>/rewind-preview", views.rewind_preview, name="rewind_preview"),
    path("saves/<str:save_id>/rewind", views.rewind, name="rewind"),
    path("saves/<str:save_id>/fork", views.fork, name="fork"),
    path("saves/<str:save_id>/jobs", views.job_list, name="job_list"),
    path("saves/<str:save_id>/jobs/<int:job_id>", views.job_detail, name="job_detail"),
    path("saves/<str:save_id>/jobs/<int:job_id>/retry", views.job_retry, name="job_retry"),
    path("saves/<str:save_id>/jobs/retry-skipped", views.jobs_retry_skipped, name="jobs_retry_skipped"),
    path("saves/<str:save_id>/chapters", views_chapters.chapter_list, name="chapter_list"),
    path("saves/<str:save_id>/chapters/close", views_chapters.chapter_close_view, name="chapter_close"),
    path("saves/<str:save_id>/chapters/<int:chapter_id>", views_chapters.chapter_detail, name="chapter_detail"),
    path("saves/<str:save_id>/chapters/<int:chapter_id>/summarize", views_chapters.chapter_summarize, name="chapter_summarize"),
    path("saves/<str:save_id>/export", views_portable.save_export, name="save_export"),
    path("universes/<str:slug>/saves/import", views_portable.save_import, name="save_import"),
    # Anything else under /api/v1/ answers a JSON 404 (after authentication), not an HTML page.
    re_path(r"^.*$", views.unknown_endpoint, name="unknown"),
]

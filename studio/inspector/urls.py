from django.urls import path

from studio.inspector.views import jobs as views_jobs
from studio.inspector.views import beliefs, context, facts, knowledge, memory_tests, mental_models, playground, replay

app_name = "memory"

urlpatterns = [
    path("universe/<slug:slug>/replay/", replay.universe_replay, name="universe_replay"),
    path("universe/<slug:slug>/tests/", memory_tests.universe_tests, name="universe_tests"),
    path("universe/<slug:slug>/tests/save/", memory_tests.universe_test_save, name="universe_test_save"),
    path("universe/<slug:slug>/tests/run/", memory_tests.universe_tests_run, name="universe_tests_run"),
    path(
        "universe/<slug:slug>/tests/<slug:test_name>/delete/",
        memory_tests.universe_test_delete,
        name="universe_test_delete",
    ),
    path("<str:save_id>/search/", playground.playground, name="playground"),
    path("<str:save_id>/search/why-not/", playground.why_not, name="why_not"),
    path("<str:save_id>/search/record/", playground.playground_record, name="playground_record"),
    path("<str:save_id>/facts/", facts.facts, name="facts"),
    path("<str:save_id>/beliefs/", beliefs.beliefs, name="beliefs"),
    path("<str:save_id>/beliefs/<int:observation_id>/", beliefs.belief_detail, name="belief_detail"),
    path("<str:save_id>/models/", mental_models.mental_models, name="mental_models"),
    path("<str:save_id>/models/refresh/", mental_models.mental_models_refresh, name="mental_models_refresh"),
    path("<str:save_id>/context/", context.context_viewer, name="context"),
    path("<str:save_id>/context/record/", context.context_record, name="context_record"),
    path("<str:save_id>/replay/", replay.replay, name="replay"),
    path("<str:save_id>/knowledge/", knowledge.knowledge, name="knowledge"),
    path("<str:save_id>/knowledge/character/<path:name>/", knowledge.knowledge_character, name="knowledge_character"),
    path("<str:save_id>/knowledge/presence/<int:turn_id>/", knowledge.presence_edit, name="presence_edit"),
    path("<str:save_id>/knowledge/reveals/", knowledge.reveal_create, name="reveal_create"),
    path("<str:save_id>/knowledge/reveals/<int:reveal_id>/delete/", knowledge.reveal_remove, name="reveal_delete"),
    path("<str:save_id>/jobs/", views_jobs.save_jobs, name="jobs"),
    path("<str:save_id>/jobs/<int:job_id>/", views_jobs.save_job_detail, name="job_detail"),
    path("<str:save_id>/jobs/<int:job_id>/retry/", views_jobs.save_job_retry, name="job_retry"),
    path("<str:save_id>/jobs/retry-skipped/", views_jobs.save_jobs_retry_skipped, name="jobs_retry_skipped"),
]

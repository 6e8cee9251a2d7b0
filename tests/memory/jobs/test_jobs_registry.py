"""The handler registry: apps register their job handlers in ready(); the engine imports no app."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from django.apps import apps

from studio.memory import jobs
from studio.memory.jobs import registry
from studio.memory.models import Job, JobKind, JobStatus

pytestmark = pytest.mark.django_db

STUDIO = Path(__file__).resolve().parents[3] / "studio"


def test_every_kind_has_the_handler_its_app_registered():
    from studio.memory.pipeline import embedding, living, lore
    from studio.memory.chapters.summarize import run_summarize_chapter
    from studio.saves import vector_jobs

    expected = {
        JobKind.SYNC_LORE: lore.run_sync_lore,
        JobKind.EMBED_TURN: embedding.run_embed_turn,
        JobKind.LIVING_TURN: living.run_living_turn,
        JobKind.REFRESH_MODELS: living.run_refresh_models,
        JobKind.VECTOR_ROLLBACK: vector_jobs.run_vector_rollback,
        JobKind.FORK_VECTORS: vector_jobs.run_fork_vectors,
        JobKind.SUMMARIZE_CHAPTER: run_summarize_chapter,
    }
    assert set(jobs.registered_kinds()) == set(JobKind.values)
    assert {kind: jobs.handler_for(kind).run for kind in JobKind.values} == expected
    assert jobs.handler_for(JobKind.EMBED_TURN).run_batch is embedding.run_embed_batch
    rules = registry.claim_rules()
    assert rules.batched == {JobKind.EMBED_TURN, JobKind.LIVING_TURN}
    assert rules.immediate == {JobKind.VECTOR_ROLLBACK, JobKind.FORK_VECTORS}


@pytest.mark.parametrize(
    "app_label, kinds",
    [
        ("memory", [JobKind.SYNC_LORE, JobKind.EMBED_TURN, JobKind.LIVING_TURN, JobKind.REFRESH_MODELS]),
        ("saves", [JobKind.VECTOR_ROLLBACK, JobKind.FORK_VECTORS]),
    ],
)
def test_ready_registers_the_apps_handlers(app_label, kinds):
    saved = {kind: jobs.handler_for(kind) for kind in kinds}
    try:
        for kind in kinds:
            registry.unregister(kind)
        assert not set(kinds) & set(jobs.registered_kinds())
        apps.get_app_config(app_label).ready()
        assert set(kinds) <= set(jobs.registered_kinds())
        assert [jobs.handler_for(kind).run for kind in kinds] == [saved[kind].run for kind in kinds]
    finally:
        for handler in saved.values():
            registry._handlers.register(handler, replace=True)


def test_a_kind_without_a_handler_fails_at_once_saying_so(game_save, settings):
    settings.AXIOM_JOB_MAX_ATTEMPTS = 3
    saved = jobs.handler_for(JobKind.REFRESH_MODELS)
    registry.unregister(JobKind.REFRESH_MODELS)
    try:
        job = Job.objects.create(kind=JobKind.REFRESH_MODELS, universe_id=game_save.universe_id, game_save=game_save)
        jobs.run_job(job.pk)
    finally:
        registry._handlers.register(saved, replace=True)
    job.refresh_from_db()
    assert job.status == JobStatus.FAILED and job.attempts == 1  # not retried: it cannot work
    assert "no handler is registered for job kind 'refresh_models'" in job.error


def test_a_handler_registered_by_another_app_runs_through_the_ledger(game_save, settings):
    """What an app's handler gets and how its outcome is recorded (retry with backoff)."""
    settings.AXIOM_JOB_MAX_ATTEMPTS = 2
    settings.AXIOM_JOB_RETRY_BACKOFF = 0
    seen = []

    def flaky(ctx):
        seen.append((ctx.job.pk, ctx.job.attempts, ctx.worker == jobs.worker_identity()))
        if len(seen) == 1:
            raise ConnectionError("not yet")
        return {"ok": True}

    saved = jobs.handler_for(JobKind.REFRESH_MODELS)
    jobs.register(JobKind.REFRESH_MODELS, flaky)
    try:
        job = Job.objects.create(kind=JobKind.REFRESH_MODELS, universe_id=game_save.universe_id, game_save=game_save)
        jobs.run_job(job.pk)  # the drain loop retries once the (zero) backoff has passed
    finally:
        registry._handlers.register(saved, replace=True)
    job.refresh_from_db()
    assert seen == [(job.pk, 1, True), (job.pk, 2, True)]
    assert job.status == JobStatus.DONE and job.result == {"ok": True} and job.attempts == 2


def _imports(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


ENGINE = ["memory/jobs", "memory/pipeline", "memory/lore/embedding_state.py", "memory/tasks.py"]
# What the engine may know of the apps: the data models it stores against.
ALLOWED_APP_MODULES = {"studio.saves.models", "studio.universes.models"}


@pytest.mark.parametrize("part", ENGINE)
def test_the_engine_imports_no_app_code(part):
    root = STUDIO / part
    files = sorted(root.rglob("*.py")) if root.is_dir() else [root]
    assert files
    offending = {}
    for path in files:
        app_imports = {
            name
            for name in _imports(path)
            if name.startswith(("studio.saves", "studio.universes", "studio.api"))
            and not any(name == allowed or name.startswith(allowed + ".") for allowed in ALLOWED_APP_MODULES)
            and name not in {"studio.saves", "studio.universes"}
        }
        if app_imports:
            offending[str(path.relative_to(STUDIO))] = sorted(app_imports)
    assert offending == {}


def _package_modules(path: Path) -> set[str]:
    """The modules of studio.memory.jobs that `path` imports ("ledger", "runner", ...)."""
    prefix = "studio.memory.jobs."
    return {name[len(prefix) :].split(".")[0] for name in _imports(path) if name.startswith(prefix)}


@pytest.mark.parametrize(
    "module, allowed",
    [
        ("ledger", set()),
        ("claims", {"ledger"}),
        ("timeline", {"ledger"}),
        ("registry", {"ledger", "claims"}),
        ("runner", {"ledger", "claims", "registry"}),
        ("dispatch", {"ledger", "runner"}),
        ("services", {"ledger", "timeline", "registry", "runner"}),
    ],
)
def test_each_layer_of_the_jobs_package_imports_only_those_below_it(module, allowed):
    assert _package_modules(STUDIO / "memory" / "jobs" / f"{module}.py") <= allowed


def test_a_job_that_could_not_be_queued_goes_to_its_kinds_hook(game_save, settings, django_capture_on_commit_callbacks):
    """The dispatcher knows no kind: what waited on a job it could not queue is its app's to mark."""
    settings.REDIS_URL = "redis://127.0.0.1:1/0"  # nothing listens there
    settings.AXIOM_JOBS_EAGER = False
    told = []
    saved = jobs.handler_for(JobKind.REFRESH_MODELS)
    jobs.register(JobKind.REFRESH_MODELS, saved.run, on_not_queued=lambda job, error: told.append((job.pk, error)))
    try:
        with django_capture_on_commit_callbacks(execute=True):
            job = jobs.enqueue_refresh_models(game_save=game_save)
    finally:
        registry._handlers.register(saved, replace=True)
    job.refresh_from_db()
    assert job.status == JobStatus.FAILED
    assert told == [(job.pk, job.error)] and job.error.startswith(jobs.QUEUE_DOWN_PREFIX)


def test_the_lore_sync_registers_its_not_queued_hook_and_a_saves_sync_marks_no_entry(
    game_save, settings, django_capture_on_commit_callbacks
):
    from studio.memory.pipeline import lore
    from studio.world.models import EmbeddingState, LoreEntry

    assert jobs.handler_for(JobKind.SYNC_LORE).on_not_queued is lore.sync_lore_not_queued
    LoreEntry.objects.filter(universe_id=game_save.universe_id).update(embedding_state=EmbeddingState.PENDING)
    settings.REDIS_URL = "redis://127.0.0.1:1/0"
    settings.AXIOM_JOBS_EAGER = False
    with django_capture_on_commit_callbacks(execute=True):
        job = jobs.enqueue_sync_lore(game_save=game_save)
    job.refresh_from_db()
    assert job.status == JobStatus.FAILED
    assert set(
        LoreEntry.objects.filter(universe_id=game_save.universe_id).values_list("embedding_state", flat=True)
    ) == {EmbeddingState.PENDING}

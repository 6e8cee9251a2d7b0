"""The worker path for real: Redis, a Celery worker subprocess, a Chroma server, an LLM server.

Set-up (module scope): a `chroma run` server on a free port (the worker embeds through it
and this process reads it, so no two processes open one embedded store), a Celery worker
subprocess (`-P prefork -c 1`, its own queue on Redis DB 9) that uses the same test
database as this process (the file-based SQLite test database, or the PostgreSQL test
database when DATABASE_URL points at PostgreSQL), and the scripted LLM server in this
process. Tests use `transactional_db` so the worker sees committed rows.

The worker loads the real MiniLM model to embed turns, hence `slow` as well as `celery`.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
import uuid
from pathlib import Path

import pytest

from studio.memory.models import Fact, Job, JobKind, JobStatus, LLMCall, MentalModel, Observation
from studio.world.models import Event, MemoryMode, Save
from studio.saves.services import save_create, turn_append
from tests.support.processes import REDIS_URL, TERMINAL, VENV_BIN, database_url, free_port, redis_available
from tests.llm_server import Reply, ScriptedLLMServer, operation_of, scripted_pipeline_responder, user_prompt

pytestmark = [pytest.mark.celery, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

ROOT = Path(__file__).resolve().parents[3]


class Stack:
    def __init__(self, tmp: Path, llm: ScriptedLLMServer):
        self.tmp = tmp
        self.llm = llm
        self.queue = f"axiom-test-{uuid.uuid4().hex[:8]}"
        self.chroma_port = free_port()
        self.chroma = None
        self.worker = None
        self.log = tmp / "worker.log"

    def start_chroma(self) -> None:
        self.chroma = subprocess.Popen(
            [
                str(VENV_BIN / "chroma"),
                "run",
                "--path",
                str(self.tmp / "chroma"),
                "--host",
                "127.0.0.1",
                "--port",
                str(self.chroma_port),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env={**os.environ, "ANONYMIZED_TELEMETRY": "False"},
            start_new_session=True,
        )
        import httpx

        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"http://127.0.0.1:{self.chroma_port}/api/v2/heartbeat", timeout=1).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            if self.chroma.poll() is not None:
                raise RuntimeError("chroma server exited")
            time.sleep(0.2)
        raise RuntimeError("chroma server did not start")

    def worker_env(self, db_url: str) -> dict:
        env = dict(os.environ)
        env.update(
            {
                "DJANGO_SETTINGS_MODULE": "tests.settings",
                "DATABASE_URL": db_url,
                "REDIS_URL": REDIS_URL,
                "AXIOM_JOB_QUEUE": self.queue,
                "AXIOM_JOB_RETRY_BACKOFF": "0.2",
                "AXIOM_JOB_MAX_ATTEMPTS": "3",
                "AXIOM_LLM_BASE_URL": self.llm.base_url,
                "AXIOM_LLM_MODEL": "test-model",
                "AXIOM_LLM_MAX_RETRIES": "0",
                "AXIOM_LLM_TIMEOUT": "60",
                "CHROMA_HOST": "127.0.0.1",
                "CHROMA_PORT": str(self.chroma_port),
                "AXIOM_VAR_DIR": str(self.tmp / "var"),
                "HF_HUB_OFFLINE": "1",
                "TRANSFORMERS_OFFLINE": "1",
                "ANONYMIZED_TELEMETRY": "False",
            }
        )
        return env

    def start_worker(self, db_url: str) -> None:
        (self.tmp / "var").mkdir(exist_ok=True)
        self.worker = subprocess.Popen(
            [
                str(VENV_BIN / "celery"),
                "-A",
                "studio",
                "worker",
                "-P",
                "prefork",
                "-c",
                "1",
                "-Q",
                self.queue,
                "-n",
                f"{self.queue}@%h",
                "--without-gossip",
                "--without-mingle",
                "--without-heartbeat",
                "-l",
                "INFO",
            ],
            cwd=ROOT,
            env=self.worker_env(db_url),
            stdout=open(self.log, "wb"),
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def stop(self) -> None:
        for process in (self.worker, self.chroma):
            if process is None or process.poll() is not None:
                continue
            os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(timeout=5)

    def vector_memory(self):
        import chromadb
        from chromadb.config import Settings

        from studio.memory.vector import VectorMemory

        client = chromadb.HttpClient(
            host="127.0.0.1", port=self.chroma_port, settings=Settings(anonymized_telemetry=False)
        )
        return VectorMemory(None, client=client)


@pytest.fixture(scope="module")
def stack(tmp_path_factory, django_db_setup, django_db_blocker):
    if not redis_available():
        pytest.skip(f"no Redis at {REDIS_URL}")
    llm = ScriptedLLMServer(scripted_pipeline_responder()).start()
    stack = Stack(tmp_path_factory.mktemp("celery"), llm)
    try:
        stack.start_chroma()
        with django_db_blocker.unblock():
            db_url = database_url()
        stack.start_worker(db_url)
        yield stack
    finally:
        stack.stop()
        llm.stop()


@pytest.fixture
def worker(stack, settings):
    settings.REDIS_URL = REDIS_URL
    settings.AXIOM_JOB_QUEUE = stack.queue
    settings.AXIOM_JOBS_EAGER = False
    settings.CHROMA_HOST = "127.0.0.1"
    settings.CHROMA_PORT = stack.chroma_port
    stack.llm.responder = scripted_pipeline_responder()
    with stack.llm.lock:
        stack.llm.requests.clear()
    yield stack
    # leave nothing running for the next test (its flush would pull rows from under it)
    wait_idle(timeout=60)


def wait_idle(save=None, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    jobs = Job.objects.all() if save is None else Job.objects.filter(game_save=save)
    while time.monotonic() < deadline:
        if not jobs.exclude(status__in=TERMINAL).exists():
            return
        time.sleep(0.1)


def wait_for(predicate, timeout: float = 120, what: str = "condition", log: Path | None = None):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.1)
    tail = log.read_text(errors="replace")[-3000:] if log and log.exists() else ""
    raise AssertionError(f"timed out waiting for {what}\n--- worker log ---\n{tail}")


def finished(save, kind):
    return Job.objects.filter(game_save=save, kind=kind, status__in=TERMINAL).first()


def test_turn_is_embedded_and_distilled_by_the_worker(worker, universe):
    from studio.world.models import UniverseMeta

    UniverseMeta.objects.create(universe=universe, key="belief_missions", value='{"Kaël": "Remembers slights."}')
    save = save_create(universe=universe, name="Worker run", memory_mode=MemoryMode.LIVING)
    turn_append(game_save=save, player_input="pay", narrative="Kaël pays the harbour master in Port Vey.")
    living = wait_for(lambda: finished(save, JobKind.LIVING_TURN), what="the living job", log=worker.log)
    embed = wait_for(lambda: finished(save, JobKind.EMBED_TURN), what="the embed job", log=worker.log)
    lore = wait_for(lambda: finished(save, JobKind.SYNC_LORE), what="the lore job", log=worker.log)
    assert living.status == JobStatus.DONE, living.error
    assert embed.status == JobStatus.DONE, embed.error
    assert lore.status == JobStatus.DONE, lore.error
    assert living.task_id  # it went through the broker

    assert Fact.objects.filter(game_save=save, turn_id=1).count() == 2
    assert Observation.objects.filter(game_save=save).count() == 2
    assert MentalModel.objects.get(game_save=save).subject == "Kaël"
    assert LLMCall.objects.filter(job=living).count() == 3

    extract_prompt = user_prompt(worker.llm.requests_for("extract")[0])
    assert "Kaël; Port Vey" in extract_prompt and "turn 1" in extract_prompt
    assert "- Kaël: Remembers slights." in user_prompt(worker.llm.requests_for("consolidate")[0])

    chunks = worker.vector_memory().get_chunks(save.save_id)
    narrative = [c for c in chunks if c.get("chunk_type") == "narrative"]
    lore_chunks = [c for c in chunks if c.get("chunk_type") == "lore"]
    assert [c["turn_id"] for c in narrative] == [1]
    assert "harbour master" in narrative[0]["text"]
    assert {c.get("entry_id") for c in lore_chunks} == {"kael", "port-vey"}


def test_rewind_while_the_job_is_in_flight_writes_nothing(worker, universe):
    from studio.saves.checkpoints import CheckpointManager

    hold = threading.Event()
    good = scripted_pipeline_responder()
    worker.llm.responder = lambda r: (
        Reply(content=good(r).content, hold=hold) if operation_of(r) == "consolidate" else good(r)
    )
    save = save_create(universe=universe, name="Rewound", memory_mode=MemoryMode.LIVING)
    turn_append(game_save=save, player_input="", narrative="Kaël pays.")
    try:
        assert worker.llm.wait_for("consolidate", timeout=120), worker.log.read_text(errors="replace")[-2000:]
        result = CheckpointManager(vector_memory=worker.vector_memory()).rewind(Save.objects.get(pk=save.pk), 0)
        assert result.changed
    finally:
        hold.set()
    living = wait_for(lambda: finished(save, JobKind.LIVING_TURN), what="the living job", log=worker.log)
    assert living.status == JobStatus.SKIPPED and "timeline rewound" in living.progress
    assert not Fact.objects.filter(game_save=save).exists()
    assert not Observation.objects.filter(game_save=save).exists()
    assert not Event.objects.filter(game_save=save).exists()


def test_killed_worker_child_is_retried_without_duplicates(worker, universe):
    hold = threading.Event()
    good = scripted_pipeline_responder()
    first = {"held": False}

    def responder(request):
        if operation_of(request) == "consolidate" and not first["held"]:
            first["held"] = True
            return Reply(content=good(request).content, hold=hold)
        return good(request)

    worker.llm.responder = responder
    save = save_create(universe=universe, name="Killed", memory_mode=MemoryMode.LIVING)
    turn_append(game_save=save, player_input="", narrative="Kaël pays.")
    try:
        assert worker.llm.wait_for("consolidate", timeout=120)
        running = Job.objects.get(game_save=save, kind=JobKind.LIVING_TURN)
        assert running.status == JobStatus.RUNNING
        pid = int(running.payload["worker"].split("|")[1])
        assert pid != worker.worker.pid  # the pool child, not the main worker process
        os.kill(pid, signal.SIGKILL)
    finally:
        hold.set()
    living = wait_for(
        lambda: Job.objects.filter(game_save=save, kind=JobKind.LIVING_TURN, status__in=TERMINAL).first(),
        what="the retried living job",
        log=worker.log,
    )
    assert living.status == JobStatus.DONE, living.error
    assert living.attempts == 2
    assert len(worker.llm.requests_for("extract")) == 2  # the whole job ran again
    assert Fact.objects.filter(game_save=save).count() == 2  # and wrote once
    assert Observation.objects.filter(game_save=save).count() == 2


def test_llm_failure_on_the_worker_is_recorded_and_retryable(worker, universe):
    good = scripted_pipeline_responder()
    worker.llm.responder = lambda r: Reply(status=500) if operation_of(r) == "reflect" else good(r)
    save = save_create(universe=universe, name="Broken LLM", memory_mode=MemoryMode.LIVING)
    turn_append(game_save=save, player_input="", narrative="Kaël pays.")
    living = wait_for(
        lambda: Job.objects.filter(game_save=save, kind=JobKind.LIVING_TURN, status=JobStatus.FAILED).first(),
        what="the failed living job",
        log=worker.log,
    )
    assert living.attempts == 3 and "HTTP 500" in living.error
    assert not Fact.objects.filter(game_save=save).exists()  # extract and consolidate succeeded, yet nothing written
    worker.llm.responder = good
    from studio.memory.jobs import job_retry

    job_retry(job=living)
    living = wait_for(
        lambda: Job.objects.filter(pk=living.pk, status__in=(JobStatus.DONE, JobStatus.FAILED)).first(),
        what="the retried job",
        log=worker.log,
    )
    assert living.status == JobStatus.DONE and Fact.objects.filter(game_save=save).count() == 2


def test_append_then_rewind_at_once_keeps_the_kept_turns_memory_on_the_worker(worker, universe, playtester):
    """Issue 19's report on the real worker: turns 1-3 appended, a rewind to 2 at once; every
    kept turn is found by /query and has its facts, turn 3 left nothing."""
    from studio.api.services import api_token_create
    from studio.memory.vector import reset_vector_memory
    from tests.plugins.api import ApiClient
    from tests.memory.jobs.rewind_race import (
        assert_kept_turns_remembered,
        narrative_facts_responder,
        play_then_rewind,
    )
    from tests.memory.jobs.rewind_race import wait_idle as wait_save_idle

    hold = threading.Event()
    worker.llm.responder = narrative_facts_responder(hold)
    save = save_create(universe=universe, name="Race", memory_mode=MemoryMode.LIVING)
    api = ApiClient(api_token_create(user=playtester, name="engine")[1])
    reset_vector_memory()  # this process reads the worker's Chroma server (the worker fixture's settings)
    try:
        play_then_rewind(api, save, worker.llm, hold)
        wait_save_idle(save)
        assert_kept_turns_remembered(api, save, worker.vector_memory())
    finally:
        hold.set()
        reset_vector_memory()

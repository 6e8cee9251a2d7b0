"""Many processes, one save: two web processes, a Celery worker, the test database and a Chroma server.

The compose stack's shape (docker-compose.yml): two `gunicorn studio.wsgi` processes (each its own
corpus cache), a Celery worker on Redis embedding the turns, one `chroma run` server, and this
test's database (the PostgreSQL test database in the PostgreSQL run, the file SQLite one
otherwise). Through the JSON API:

- a turn appended through web process A, once the worker has embedded it, is found at once by a
  query on web process B, whose cache held the save before the write (issue 33: B reads what
  changed from the change log, with no wait and no expiry);
- after A rewinds by one, B never answers from its old view: not the rewound turn, and not after
  a new turn takes the rewound turn's number (a stale cache would still hold the old chunk, now
  inside the horizon);
- and the other way round, B writes and A reads.

The worker and both web processes load the real MiniLM (hence `slow`); `celery` for the worker.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
import uuid
from pathlib import Path

import httpx
import pytest

from studio.api.services import api_token_create
from studio.memory.models import Job, JobStatus
from studio.saves.services import save_create

from tests.support.processes import REDIS_URL, TERMINAL, VENV_BIN, database_url, free_port, redis_available

pytestmark = [pytest.mark.celery, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

ROOT = Path(__file__).resolve().parents[1]


def wait_for(url: str, process: subprocess.Popen, log: Path, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"{process.args[0]} exited: {log.read_text()[-3000:] if log.exists() else ''}")
        try:
            if httpx.get(url, timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.3)
    raise RuntimeError(f"{url} did not answer: {log.read_text()[-3000:] if log.exists() else ''}")


class Processes:
    """The Chroma server, the worker and the two web processes; every one in its own process group."""

    def __init__(self, tmp: Path):
        self.tmp = tmp
        self.queue = f"axiom-test-{uuid.uuid4().hex[:8]}"
        self.chroma_port, self.ports = free_port(), (free_port(), free_port())
        self.running: list[subprocess.Popen] = []

    def env(self, db_url: str) -> dict:
        env = {key: value for key, value in os.environ.items() if not key.startswith("PYTEST")}
        env.update(
            {
                "DJANGO_SETTINGS_MODULE": "tests.settings",
                "PYTHONPATH": str(ROOT),
                "DATABASE_URL": db_url,
                "REDIS_URL": REDIS_URL,
                "AXIOM_JOB_QUEUE": self.queue,
                "AXIOM_JOB_RETRY_BACKOFF": "0.2",
                "CHROMA_HOST": "127.0.0.1",
                "CHROMA_PORT": str(self.chroma_port),
                "AXIOM_VAR_DIR": str(self.tmp / "var"),  # one ONNX export for all (built under its file lock)
                "AXIOM_EMBEDDING_RUNTIME": "onnx",
                "HF_HUB_OFFLINE": "1",
                "TRANSFORMERS_OFFLINE": "1",
                "ANONYMIZED_TELEMETRY": "False",
                "DEBUG": "0",
                "ALLOWED_HOSTS": "127.0.0.1,localhost",
            }
        )
        return env

    def spawn(self, args: list[str], log_name: str, env: dict | None = None) -> tuple[subprocess.Popen, Path]:
        log = self.tmp / log_name
        process = subprocess.Popen(
            args, cwd=ROOT, env=env, stdout=open(log, "wb"), stderr=subprocess.STDOUT, start_new_session=True
        )
        self.running.append(process)
        return process, log

    def start(self, db_url: str) -> None:
        (self.tmp / "var").mkdir(exist_ok=True)
        chroma, log = self.spawn(
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
            "chroma.log",
            {**os.environ, "ANONYMIZED_TELEMETRY": "False"},
        )
        wait_for(f"http://127.0.0.1:{self.chroma_port}/api/v2/heartbeat", chroma, log)
        env = self.env(db_url)
        self.spawn(
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
            "worker.log",
            env,
        )
        for name, port in zip("ab", self.ports):
            web, log = self.spawn(
                [
                    str(VENV_BIN / "gunicorn"),
                    "studio.wsgi",
                    "--bind",
                    f"127.0.0.1:{port}",
                    "--workers",
                    "1",
                    "--threads",
                    "4",
                    "--timeout",
                    "300",
                ],
                f"web-{name}.log",
                env,
            )
            wait_for(f"http://127.0.0.1:{port}/healthz", web, log)

    def stop(self) -> None:
        for process in reversed(self.running):
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
                try:
                    process.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    os.killpg(process.pid, signal.SIGKILL)
                    process.wait(timeout=5)


@pytest.fixture(scope="module")
def processes(tmp_path_factory, django_db_setup, django_db_blocker):
    if not redis_available():
        pytest.skip(f"no Redis at {REDIS_URL}")
    stack = Processes(tmp_path_factory.mktemp("processes"))
    try:
        with django_db_blocker.unblock():
            db_url = database_url()
        stack.start(db_url)
        yield stack
    finally:
        stack.stop()


def wait_idle(game_save, timeout: float = 180) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not Job.objects.filter(game_save=game_save).exclude(status__in=TERMINAL).exists():
            failed = list(Job.objects.filter(game_save=game_save, status=JobStatus.FAILED).values_list("kind", "error"))
            assert not failed, failed
            return
        time.sleep(0.2)
    raise AssertionError(
        f"jobs still running: {list(Job.objects.filter(game_save=game_save).values_list('kind', 'status'))}"
    )


class Web:
    """One web process, through the JSON API."""

    def __init__(self, port: int, key: str, save_id: str):
        self.client = httpx.Client(
            base_url=f"http://127.0.0.1:{port}/api/v1/saves/{save_id}",
            timeout=300,
            headers={"Authorization": f"Bearer {key}"},
        )

    def append(self, narrative: str) -> int:
        response = self.client.post("/turns", json={"player_input": "I look around.", "narrative": narrative})
        assert response.status_code == 201, response.text
        return response.json()["turn"]["turn_id"]

    def query(self, text: str) -> dict:
        response = self.client.post("/query", json={"query_text": text, "k": 5})
        assert response.status_code == 200, response.text
        return response.json()

    def rewind(self, turn: int) -> None:
        response = self.client.post("/rewind", json={"turn_id": turn})
        assert response.status_code == 200, response.text


def hits(result: dict) -> list[tuple[int, str]]:
    return [(hit["turn_id"], hit["text"]) for hit in result["results"]]


def test_a_turn_written_through_one_process_is_read_by_the_other_at_once(processes, universe, playtester, settings):
    settings.REDIS_URL, settings.AXIOM_JOB_QUEUE, settings.AXIOM_JOBS_EAGER = REDIS_URL, processes.queue, False
    game_save = save_create(universe=universe, name="two processes")
    _, key = api_token_create(user=playtester, name="processes")
    a, b = (Web(port, key, game_save.save_id) for port in processes.ports)
    for text in (
        "Kaël docks at Port Vey at dawn.",
        "Mira counts the debts in her ledger.",
        "The Bellwright rings the storm bell.",
    ):
        a.append(text)
    wait_idle(game_save)
    assert (2, "Mira counts the debts in her ledger.") in hits(b.query("debts in the ledger"))  # B holds the save now
    assert a.append("A zephyrine lantern burns blue on the reef.") == 4
    wait_idle(game_save)  # the worker embedded turn 4
    found = b.query("zephyrine lantern on the reef")
    assert found["stats"]["corpus_rebuilt"], "B answered from the corpus it held before the write"
    assert (4, "A zephyrine lantern burns blue on the reef.") in hits(found), found

    a.rewind(3)
    assert all(turn != 4 for turn, _text in hits(b.query("zephyrine lantern on the reef")))
    assert b.append("Fog rolls over the quiet harbour.") == 4  # turn 4 again, another text, through B
    wait_idle(game_save)
    for web in (a, b):  # neither process keeps the rewound chunk, though turn 4 is inside the horizon again
        assert all("zephyrine" not in text for _turn, text in hits(web.query("zephyrine lantern on the reef")))
        assert (4, "Fog rolls over the quiet harbour.") in hits(web.query("fog over the quiet harbour"))

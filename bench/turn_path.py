"""The turn path against the save's size (issue 33): what a turn costs at 1,000, 10,000 and 100,000 turns.

For each size a save is bulk-loaded (below), then each operation is timed `--repeats` times
(p50 and p95, milliseconds), in this order:

- **append + accept**: a narrator draft's answer accepted (`narrator_accept`: `turn_append` with
  its lore activation record, chapter check, presence, job queueing; the snapshot; the recorded
  queries), the turn's EMBED_TURN job then run untimed (real MiniLM);
- **first context**: `next_turn_context` right after that write (the corpus moved: the first
  query after a write pays for the reload), and **first query**: one `memory_search` right after
  another such write;
- **proxy swipe** and **proxy new message**: `POST /v1/chat/completions` through Django's test
  client (the view, the sync, the memory context, the proposal, the relay) to the scripted
  upstream of tests/llm_server.py, time to the first byte (and, as `...:whole`, to the last byte and
  what the proxy does after it: the answer recorded and checked by the continuity guard); a new
  message accepts the previous answer (its embedding job run untimed before the next request);
  beside them, the same request straight to the upstream (`direct_request`, httpx): what the proxy
  adds is the difference;
- **rewind by one**: `CheckpointManager.rewind` to the turn before (one transaction, then the
  VECTOR_ROLLBACK job it runs itself).

Every size starts with the process-wide text caches empty (`studio.memory.text_caches`): the sizes run one after
another in one process, and a later size would otherwise find the words and texts of the earlier ones counted.

Beside them, in the same run and on the same stack, the raw libraries' floors: one MiniLM
encode of a query (ONNX Runtime), one Chroma add and one Chroma query (50 nearest, no `where`)
on the save's own collection (the added row deleted again, untimed), one BM25 scoring of the new chunk
(rank_bm25), one indexed row insert (plain SQL on the same database, committed).

Stacks (`--stacks`): `sqlite` (a SQLite file and an embedded Chroma directory, one process) and
`postgres` (PostgreSQL, database `--pg-db`, dropped and created, and a `chroma run` server this
bench starts on a free port, reached through HttpClient). Each stack runs in a child process
(Django is configured once per process); the parent prints the table and the 100k / 1k ratios.

The bulk-loaded save: Event_Log and State_Cache rows (a `location` changing every 25 turns; each narrative 45 words drawn
with Zipf frequencies from a 20,000-word pseudo-vocabulary, as prose: a query's words are in a
few percent of the turns),
lore activation, presence and EMBED_TURN job rows per turn, closed chapters with summaries and
their arcs (20 turns a chapter, 4 per arc, as the defaults close them), a 40-entry Lore Book
with keys, and one narrative chunk per turn in Chroma. The bulk history's vectors come from a
cheap hashing embedder (384 dimensions, tests/fakes.py's, so Chroma's index has the same shape
and size) unless `--bulk-embedder real`; every measured turn, the lore and every query use the
real MiniLM on ONNX Runtime.

    .venv/bin/python bench/turn_path.py --sizes 1000,10000,100000 --json bench/data/turn_path.json
    .venv/bin/python bench/turn_path.py --sizes 1000,10000 --stacks sqlite --profile accept
"""

from __future__ import annotations

import argparse
import collections
import cProfile
import io
import itertools
import json
import os
import pstats
import random
import socket
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

WORDS = (
    "harbour tide lantern smuggler ledger debt pier rope salt fog bell chapel reef map coin storm "
    "guild clerk eel net boat oar gull cellar key letter wax seal bridge mill market rain"
).split()
NAMES = ["Kael", "Mira", "Dace", "Hesper", "Corvin", "Anselm", "Tull", "Verrow"]
PLACES = ["the pier", "the chapel", "the market", "the mill", "the cellar", "the bridge"]
OPERATIONS = ("append_accept", "first_context", "first_query", "proxy_swipe", "proxy_new_message", "rewind_one")
LABELS = {
    "append_accept": "append + accept",
    "first_context": "first memory context after",
    "first_query": "first memory query after",
    "proxy_swipe": "proxy swipe",
    "proxy_new_message": "proxy new message",
    "rewind_one": "rewind by one",
}
FLOORS = ("encode", "chroma_add", "chroma_query", "bm25_score", "row_insert")


def _vocabulary(size: int = 20_000) -> tuple[list[str], list[float]]:
    """Pseudo-words with Zipf frequencies (rank r has weight 1/r), as prose has: the story's names at ranks 20-27
    and its words at ranks 100-135, so a query term is in a few percent of the turns, not in all of them."""
    rng = random.Random(33)
    syllables = [c + v for c in "bdfghklmnprstvz" for v in "aeiou"]
    words: list[str] = []
    seen = set(WORDS) | {name.lower() for name in NAMES}
    while len(words) < size:
        word = "".join(rng.choice(syllables) for _ in range(rng.randint(2, 3)))
        if word not in seen:
            seen.add(word)
            words.append(word)
    words[20:20] = NAMES
    words[100:100] = WORDS
    words = words[:size]
    weights = list(itertools.accumulate(1 / rank for rank in range(1, size + 1)))
    return words, weights


VOCABULARY, CUMULATIVE = _vocabulary()


def narrative(rng: random.Random, turn: int) -> str:
    return f"Turn {turn}: " + " ".join(rng.choices(VOCABULARY, cum_weights=CUMULATIVE, k=45)) + "."


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# --- the stack ------------------------------------------------------------------------------------


def configure(stack: str, workdir: Path, pg_db: str) -> subprocess.Popen | None:
    """Set the environment of `stack`, start its Chroma server, configure Django; return the server."""
    os.environ.update(
        {
            # DEBUG off, as a deployment runs: with it on, Django logs every query (on SQLite with one more query
            # per query, to quote its parameters), a cost no server pays.
            "DEBUG": "0",
            "ALLOWED_HOSTS": "testserver,127.0.0.1,localhost",
            "SECURE_SSL_REDIRECT": "0",
            "SECRET_KEY": "bench-only",
            "AXIOM_VAR_DIR": str(workdir),
            "HF_HUB_OFFLINE": "1",
            "ANONYMIZED_TELEMETRY": "False",
            "LOG_LEVEL": "WARNING",
            "DJANGO_SETTINGS_MODULE": "studio.settings",
            "AXIOM_EMBEDDING_RUNTIME": "onnx",
        }
    )
    os.environ.pop("REDIS_URL", None)
    # With DEBUG off WhiteNoise warns that the unbuilt static directory is missing, naming this machine's path.
    warnings.filterwarnings("ignore", message="No directory at")
    server = None
    if stack == "sqlite":
        os.environ["DATABASE_URL"] = f"sqlite:///{workdir}/bench.sqlite3"
        os.environ["CHROMA_PATH"] = str(workdir / "chroma")
        os.environ.pop("CHROMA_HOST", None)
    else:
        import psycopg

        with psycopg.connect("postgresql://postgres@127.0.0.1:5432/postgres", autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{pg_db}" WITH (FORCE)')
            conn.execute(f'CREATE DATABASE "{pg_db}"')
        os.environ["DATABASE_URL"] = f"postgres://postgres@127.0.0.1:5432/{pg_db}"
        port = free_port()
        server = subprocess.Popen(
            [
                str(Path(sys.executable).parent / "chroma"),
                "run",
                "--path",
                str(workdir / "chroma-server"),
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        import httpx

        deadline = time.monotonic() + 90
        while True:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/api/v2/heartbeat", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline or server.poll() is not None:
                raise SystemExit("the Chroma server did not start")
            time.sleep(0.3)
        os.environ["CHROMA_HOST"] = "127.0.0.1"
        os.environ["CHROMA_PORT"] = str(port)
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    return server


# --- the bulk-loaded save ------------------------------------------------------------------------


def bulk_load(universe, size: int, vectors, rng: random.Random, bulk_embedder) -> object:
    """Create a save of `size` turns with bulk inserts (see the module docstring); return it."""
    from studio.memory.chapters.models import Chapter, ChapterCloseReason, SummaryStatus
    from studio.memory.knowledge.models import Presence, PresenceSource
    from studio.memory.models import Job, JobKind, JobStatus, LoreActivation
    from studio.memory.retrieval import chunks as chunk_module
    from studio.world.models import Event, MemoryMode, Save, StateCache

    game_save = Save.objects.create(
        universe=universe, name=f"{size} turns", memory_mode=MemoryMode.CLASSIC, meta=universe.meta_values()
    )
    batch = 2000
    texts = {}
    for start in range(1, size + 1, batch):
        turns = range(start, min(size, start + batch - 1) + 1)
        events, states, activations, presence, jobs = [], [], [], [], []
        for turn in turns:
            text = texts[turn] = narrative(rng, turn)
            place = PLACES[(turn // 25) % len(PLACES)]
            events.append(
                Event(
                    game_save=game_save, turn_id=turn, player_input=f"I look around {place} ({turn}).", narrative=text
                )
            )
            states.append(StateCache(game_save=game_save, turn_id=turn, state={"location": place}))
            activations.append(
                LoreActivation(
                    game_save=game_save,
                    turn_id=turn,
                    state={},
                    activated=[],
                    sequence=[],
                    seed=f"bulk-{turn}",
                    book_version="bulk",
                )
            )
            presence.append(
                Presence(
                    game_save=game_save,
                    turn_id=turn,
                    characters=[NAMES[turn % len(NAMES)]],
                    source=PresenceSource.CARRIED,
                    scene=place,
                )
            )
            jobs.append(
                Job(
                    kind=JobKind.EMBED_TURN,
                    universe=universe,
                    game_save=game_save,
                    turn_id=turn,
                    status=JobStatus.DONE,
                    progress="done",
                )
            )
        Event.objects.bulk_create(events)
        StateCache.objects.bulk_create(states)
        LoreActivation.objects.bulk_create(activations)
        Presence.objects.bulk_create(presence)
        Job.objects.bulk_create(jobs)
    # Chapters of 20 turns and arcs of 4, level by level, as chapter_after_turn and _roll_up close them.
    chapters, level_rows = [], [(first, min(first + 19, size)) for first in range(1, size - 19, 20)]
    level = 0
    while level_rows:
        for first, last in level_rows:
            chapters.append(
                Chapter(
                    game_save=game_save,
                    level=level,
                    first_turn=first,
                    last_turn=last,
                    closed_turn=last,
                    close_reason=ChapterCloseReason.LENGTH if level == 0 else ChapterCloseReason.ROLLUP,
                    summary=f"Turns {first}-{last}: " + " ".join(rng.choice(WORDS) for _ in range(40)),
                    summary_status=SummaryStatus.DONE,
                )
            )
        level_rows = [(level_rows[i][0], level_rows[i + 3][1]) for i in range(0, len(level_rows) - 3, 4)]
        level += 1
    Chapter.objects.bulk_create(chapters, batch_size=batch)
    Save.objects.filter(pk=game_save.pk).update(current_turn=size)
    game_save.refresh_from_db()
    # The history's chunks: prepared as embed_chunks prepares them, vectors from the bulk embedder.
    items = [{"turn_id": turn, "text": texts[turn]} for turn in range(1, size + 1)]
    for start in range(0, len(items), 5000):
        ids, documents, metadatas, _ = chunk_module.prepare_chunks(
            game_save.save_id, items[start : start + 5000], bulk_embedder
        )
        vectors.store.upsert(game_save.save_id, ids, bulk_embedder.encode(documents), documents, metadatas)
    vectors.note_external_write(game_save.save_id)
    lore = [{"entry_id": e.entry_id, "text": e.text, "title": e.title} for e in universe.lore_entries.all()]
    vectors.sync_lore(game_save.save_id, lore)
    return game_save


# --- the measured operations ---------------------------------------------------------------------


class Runner:
    """Jobs queued by a measured call are recorded, then run untimed by `drain` (real MiniLM)."""

    def __init__(self):
        from studio.memory.jobs import dispatch

        self.queued: list[int] = []
        dispatch.send = lambda job_id, countdown=0: self.queued.append(job_id)

    def drain(self) -> None:
        from studio.memory.jobs.runner import run_job

        while self.queued:
            run_job(self.queued.pop(0))


def floors(vectors, game_save, connection_alias="default") -> dict[str, float]:
    """One call each of the raw libraries the turn path stands on (seconds)."""
    import numpy as np
    from django.db import connection, transaction
    from rank_bm25 import BM25Okapi

    from studio.memory.embeddings.embedding import get_embedder
    from studio.memory.retrieval import lexical

    embedder = get_embedder()
    text = narrative(random.Random(), 0)
    out = {}
    started = time.perf_counter()
    vector = embedder.encode([f"I ask Mira about the {random.choice(WORDS)} {time.time_ns()}"])[0]
    out["encode"] = time.perf_counter() - started
    collection = vectors.collection_for(game_save.save_id)
    chunk_id = f"floor-{time.time_ns()}"
    started = time.perf_counter()
    collection.add(
        ids=[chunk_id],
        embeddings=[np.asarray(vector, dtype=np.float32)],
        documents=[text],
        metadatas=[{"save_id": game_save.save_id, "turn_id": game_save.current_turn, "chunk_type": "floor"}],
    )
    out["chroma_add"] = time.perf_counter() - started
    started = time.perf_counter()
    collection.query(query_embeddings=[np.asarray(vector, dtype=np.float32)], n_results=50, include=["distances"])
    out["chroma_query"] = time.perf_counter() - started
    collection.delete(ids=[chunk_id])
    started = time.perf_counter()
    BM25Okapi([lexical.index_terms(text)]).get_scores(lexical.index_terms("Mira ledger harbour"))
    out["bm25_score"] = time.perf_counter() - started
    with connection.cursor() as cursor:
        started = time.perf_counter()
        with transaction.atomic():
            cursor.execute(
                "INSERT INTO bench_floor_rows (save_id, turn_id, text) VALUES (%s, %s, %s)",
                [game_save.pk, time.time_ns() % 2_000_000_000, text],
            )
        out["row_insert"] = time.perf_counter() - started
    return out


def query_origin(counter):
    """A database execute wrapper counting each query, and the time its execute took (the database's answer and the
    driver's), by the studio frames that ran it (`--queries` only)."""
    import traceback

    studio = str(ROOT / "studio")

    def wrapper(execute, sql, params, many, context):
        stack = traceback.StackSummary.extract(traceback.walk_stack(None), lookup_lines=False)
        frames = [f for f in stack if f.filename.startswith(studio)]
        where = " < ".join(f"{Path(f.filename).relative_to(ROOT)}:{f.lineno}" for f in frames[:3])
        started = time.perf_counter()
        try:
            return execute(sql, params, many, context)
        finally:
            counter[where or "(outside studio/)"] += 1
            counter.times[where or "(outside studio/)"] += time.perf_counter() - started

    return wrapper


class Origins(collections.Counter):
    """Queries counted by origin, with `times`: the seconds their executes took."""

    def __init__(self):
        super().__init__()
        self.times = collections.Counter()


def measure(size: int, game_save, vectors, runner: Runner, args, rng: random.Random, api) -> dict:
    """Time every operation `args.repeats` times on `game_save`; return {operation: [seconds]}."""
    from django.db import connection

    from studio.memory.recall.context import next_turn_context
    from studio.memory.recall.query_params import ContextParams
    from studio.memory.recall.search import memory_search
    from studio.saves.checkpoints import CheckpointManager
    from studio.saves.narrator.services import narrator_accept, narrator_alternative_add, narrator_draft_create

    samples: dict[str, list[float]] = {name: [] for name in (*OPERATIONS, *FLOORS)}
    profiles = {name: cProfile.Profile() for name in args.profile}

    origins = {name: Origins() for name in args.queries}

    def timed(name, call):
        profile, counter = profiles.get(name), origins.get(name)
        started = time.perf_counter()
        if profile is not None:
            profile.enable()
        try:
            if counter is None:
                result = call()
            else:
                with connection.execute_wrapper(query_origin(counter)):
                    result = call()
        finally:
            if profile is not None:
                profile.disable()
        samples.setdefault(name, []).append(time.perf_counter() - started)
        return result

    def accept_one(name="append_accept"):
        game_save.refresh_from_db()
        player_input = f"I ask {rng.choice(NAMES)} about the {rng.choice(WORDS)}."
        draft = narrator_draft_create(game_save=game_save, player_input=player_input)
        narrator_alternative_add(
            draft=draft,
            text=narrative(rng, game_save.current_turn + 1),
            status="done",
            model="bench",
            system_prompt="You narrate Port Vey.",
            user_prompt=f"Memory...\n{player_input}",
        )
        timed(name, lambda: narrator_accept(draft=draft))
        runner.drain()

    def query_text():
        return f"I ask {rng.choice(NAMES)} about the {rng.choice(WORDS)} and the {rng.choice(WORDS)}."

    accept_one(name="_warm_up")  # the first load of the save's corpus and book is not a turn's cost
    game_save.refresh_from_db()
    next_turn_context(game_save=game_save, params=ContextParams(query_text=query_text()))
    for _ in range(args.repeats):
        accept_one()
        game_save.refresh_from_db()
        timed(
            "first_context",
            lambda: next_turn_context(game_save=game_save, params=ContextParams(query_text=query_text())),
        )
    for _ in range(args.repeats):
        accept_one(name="_accept_again")
        game_save.refresh_from_db()
        timed(
            "first_query",
            lambda: memory_search(game_save=game_save, query_text=query_text(), k=6, exclude_chunk_type="lore"),
        )
    for _ in range(args.repeats):
        game_save.refresh_from_db()
        for name, seconds in floors(vectors, game_save).items():
            samples[name].append(seconds)
    api.measure(size, game_save, samples, timed, runner)
    manager = CheckpointManager()
    for _ in range(args.repeats):
        game_save.refresh_from_db()
        timed("rewind_one", lambda: manager.rewind(game_save, game_save.current_turn - 1))
        runner.drain()
    samples.pop("_accept_again", None)
    samples.pop("_warm_up", None)
    for name, counter in origins.items():
        lines = "\n".join(
            f"{count / args.repeats:6.1f} {counter.times[where] * 1000 / args.repeats:7.2f} ms  {where}"
            for where, count in counter.most_common()
        )
        total = sum(counter.values()) / args.repeats
        spent = sum(counter.times.values()) * 1000 / args.repeats
        print(
            f"\n=== {total:.1f} SQL queries per {name} at {size:,} turns ({spent:.1f} ms in their executes), by origin "
            f"===\n{lines}",
            file=sys.stderr,
        )
    for name, profile in profiles.items():
        if args.profile_dump:
            Path(args.profile_dump).mkdir(parents=True, exist_ok=True)
            profile.dump_stats(str(Path(args.profile_dump) / f"{name}-{size}.prof"))
        out = io.StringIO()
        pstats.Stats(profile, stream=out).sort_stats("cumulative").print_stats(args.profile_lines)
        print(f"\n=== profile of {name} at {size:,} turns ===\n{out.getvalue()}", file=sys.stderr, flush=True)
    return samples


class ProxyChat:
    """The memory proxy's two requests, as a front end with a window of the chat sends them."""

    def __init__(self, args, rng):
        from django.conf import settings
        from django.contrib.auth.models import Group, User
        from django.test import Client

        from studio.api.services import api_token_create
        from studio.roles import PLAYTESTERS
        from tests.llm_server import Reply, ScriptedLLMServer

        self.answer = "The tide turns; Mira closes her ledger and looks up."
        self.server = ScriptedLLMServer(lambda request: Reply(content=self.answer)).start()
        settings.AXIOM_LLM_BASE_URL = self.server.base_url
        settings.AXIOM_LLM_MODEL = "bench-model"
        settings.ALLOWED_HOSTS = ["*"]
        user = User.objects.get(username="bench")
        user.groups.add(Group.objects.get_or_create(name=PLAYTESTERS)[0])
        self.user = user
        self.key = None
        self.client = Client()
        self.args = args
        self.rng = rng
        self._token = api_token_create

    def request(self, model, messages) -> None:
        body = {"model": model, "messages": messages, "stream": True}
        response = self.client.post(
            "/v1/chat/completions",
            json.dumps(body),
            content_type="application/json",
            headers={"Authorization": f"Bearer {self.key}"},
        )
        if response.status_code != 200:
            raise SystemExit(f"proxy answered {response.status_code}: {response.content[:500]!r}")
        iterator = iter(response.streaming_content)
        next(iterator)
        self.first_byte = time.perf_counter()
        for _ in iterator:
            pass
        response.close()
        self.timing = {}
        for part in response["X-Axiom-Timing"].split(", "):
            name, _, ms = part.partition("=")
            self.timing[name] = float(ms) / 1000

    def direct(self, messages) -> None:
        """The same request straight to the model, as a front end without the proxy sends it: the floor
        of a proxy request (the proxy adds what it takes beyond this)."""
        import httpx

        body = {"model": "bench-model", "messages": messages, "stream": True}
        if getattr(self, "direct_client", None) is None:  # kept, as the proxy keeps its connection to the model
            self.direct_client = httpx.Client(timeout=60)
        with self.direct_client.stream("POST", f"{self.server.base_url}/chat/completions", json=body) as response:
            if response.status_code != 200:
                raise SystemExit(f"the model answered {response.status_code}")
            chunks = response.iter_bytes()
            next(chunks, None)  # the first byte, then the rest of the answer, as the proxy request reads it
            self.first_byte = time.perf_counter()
            for _ in chunks:
                pass

    def measure(self, size, game_save, samples, timed, runner) -> None:
        if self.key is None:
            _, self.key = self._token(user=self.user, name="bench")
        game_save.refresh_from_db()
        system = {"role": "system", "content": "You narrate Port Vey.\n{{axiom_memory}}"}
        chat = [(e.player_input, e.narrative) for e in game_save.events.order_by("-turn_id")[: self.args.window]][::-1]

        def messages(turns, pending):
            out = [system]
            for player_input, answer in turns:
                out += [{"role": "user", "content": player_input}, {"role": "assistant", "content": answer}]
            return out + [{"role": "user", "content": pending}]

        model = f"axiom/{game_save.save_id}/bench-model"
        pending = f"I ask {self.rng.choice(NAMES)} about the {self.rng.choice(WORDS)}."
        self.request(model, messages(chat, pending))  # warm-up: the proposal for the pending turn
        runner.drain()

        def parts(kind):  # the proxy's own split of the request (X-Axiom-Timing): sync, memory, proposal
            for name, seconds in self.timing.items():
                samples.setdefault(f"{kind}:{name}", []).append(seconds)

        def first_byte(name, call):
            """Time `call` to its first byte (`name`) and whole (`name:whole`: the rest of the answer, and what the
            proxy does after its last byte, such as the continuity guard's check of it)."""
            started = time.perf_counter()
            timed(name, call)
            whole = samples[name][-1]
            samples[name][-1] = self.first_byte - started
            samples.setdefault(f"{name}:whole", []).append(whole)

        for _ in range(self.args.repeats):
            first_byte("direct_request", lambda: self.direct(messages(chat, pending)))
        for _ in range(self.args.repeats):
            first_byte("proxy_swipe", lambda: self.request(model, messages(chat, pending)))
            parts("proxy_swipe")
            runner.drain()
        for _ in range(self.args.repeats):
            chat = (chat + [(pending, self.answer)])[-self.args.window :]
            pending = f"I ask {self.rng.choice(NAMES)} about the {self.rng.choice(WORDS)}."
            first_byte("proxy_new_message", lambda: self.request(model, messages(chat, pending)))
            parts("proxy_new_message")
            runner.drain()


def run_stack(args) -> int:
    workdir = Path(tempfile.mkdtemp(prefix=f"axiom-bench-turnpath-{args.stack}-"))
    server = configure(args.stack, workdir, args.pg_db)
    try:
        return _run_stack(args, workdir)
    finally:
        if server is not None:
            os.killpg(server.pid, 15)
            server.wait(timeout=30)


def _run_stack(args, workdir: Path) -> int:
    from django.contrib.auth.models import User
    from django.db import connection

    from studio.memory.embeddings.embedding import get_embedder
    from studio.memory.text_caches import text_caches_clear
    from studio.memory.vector import get_vector_memory
    from studio.world.models import LoreEntry, Universe
    from tests.fakes import HashingEmbedder

    embedder = get_embedder()
    if embedder is None:
        raise SystemExit("the embedding model does not load")
    bulk_embedder = embedder if args.bulk_embedder == "real" else HashingEmbedder(dimension=384)
    vectors = get_vector_memory()
    with connection.cursor() as cursor:
        cursor.execute(
            "CREATE TABLE bench_floor_rows (id INTEGER PRIMARY KEY, save_id INTEGER, turn_id BIGINT, text TEXT)"
            if connection.vendor == "sqlite"
            else "CREATE TABLE bench_floor_rows (id BIGSERIAL PRIMARY KEY, save_id INTEGER, turn_id BIGINT, text TEXT)"
        )
        cursor.execute("CREATE INDEX bench_floor_rows_turn ON bench_floor_rows (save_id, turn_id)")
    owner = User.objects.create_user("bench", password="x")
    universe = Universe.objects.create(name="Bench", slug="bench", owner=owner)
    rng = random.Random(7)
    for index in range(40):
        name = NAMES[index % len(NAMES)] + (f" {index}" if index >= len(NAMES) else "")
        LoreEntry.objects.create(
            universe=universe,
            entry_id=f"e{index}",
            title=name,
            kind="character",
            text=f"{name} " + " ".join(rng.choice(WORDS) for _ in range(40)),
            keys=[name],
        )
    runner = Runner()
    runner.drain()
    proxy = ProxyChat(args, rng)
    results = []
    for size in [int(s) for s in args.sizes.split(",")]:
        text_caches_clear()  # each size starts as cold as the first: no text counted or folded for an earlier one
        started = time.perf_counter()
        game_save = bulk_load(universe, size, vectors, rng, bulk_embedder)
        runner.queued.clear()
        load_s = time.perf_counter() - started
        print(f"[{args.stack}] {size:,} turns loaded in {load_s:.1f} s", file=sys.stderr, flush=True)
        load_before = os.getloadavg()
        samples = measure(size, game_save, vectors, runner, args, rng, proxy)
        row = {
            "stack": args.stack,
            "turns": size,
            "load_s": round(load_s, 1),
            "load_average": [round(x, 2) for x in load_before],
            "load_average_after": [round(x, 2) for x in os.getloadavg()],
        }
        for name, values in samples.items():
            row[name] = {
                "p50_ms": round(percentile(values, 50) * 1000, 2),
                "p95_ms": round(percentile(values, 95) * 1000, 2),
                "n": len(values),
            }
        results.append(row)
        print(json.dumps(row), flush=True)
    proxy.server.stop()
    Path(args.out).write_text(json.dumps(results, indent=2))
    return 0


# --- the parent: both stacks, the table, the ratios -------------------------------------------------


def floor_sum(row, q="p50_ms") -> float:
    return sum(row[name][q] for name in FLOORS)


def print_table(results: list[dict]) -> None:
    print(
        "\n| stack | turns | "
        + " | ".join(LABELS[o] + " p50 / p95" for o in OPERATIONS)
        + " | floor (encode + Chroma add + query + BM25 + insert) p50 | load |"
    )
    print("|---|---:|" + "---:|" * len(OPERATIONS) + "---:|---|")
    for row in results:
        cells = [f"{row[o]['p50_ms']:,.1f} / {row[o]['p95_ms']:,.1f}" for o in OPERATIONS]
        floors_text = " + ".join(f"{row[name]['p50_ms']:.1f}" for name in FLOORS)
        print(
            f"| {row['stack']} | {row['turns']:,} | "
            + " | ".join(cells)
            + f" | {floor_sum(row):.1f} ({floors_text}) | {row['load_average'][0]:.2f} |"
        )
    print("\nRatios, largest save / smallest save, p50 (p95), same run:")
    for stack in sorted({r["stack"] for r in results}):
        rows = sorted((r for r in results if r["stack"] == stack), key=lambda r: r["turns"])
        if len(rows) < 2:
            continue
        small, large = rows[0], rows[-1]
        parts = [
            f"{LABELS[o]} {large[o]['p50_ms'] / small[o]['p50_ms']:.2f}x ({large[o]['p95_ms'] / small[o]['p95_ms']:.2f}x)"
            for o in OPERATIONS
        ]
        print(f"- {stack}, {large['turns']:,} / {small['turns']:,}: " + "; ".join(parts))
        print(
            f"  first memory query after a write at {large['turns']:,}: "
            f"{large['first_query']['p50_ms'] / floor_sum(large):.2f}x the floor's sum"
        )
    print("\nWhat the proxy adds: p50 of the request through the proxy minus p50 of the same request straight to")
    print("the model (time to the first byte, the same run):")
    for row in results:
        if "direct_request" not in row:
            continue
        direct = row["direct_request"]["p50_ms"]
        print(
            f"- {row['stack']}, {row['turns']:,} turns: direct {direct:.1f} ms; a swipe adds "
            f"{row['proxy_swipe']['p50_ms'] - direct:.1f} ms, a new message {row['proxy_new_message']['p50_ms'] - direct:.1f} ms"
        )
        if "direct_request:whole" in row:
            whole = row["direct_request:whole"]["p50_ms"]
            print(
                f"  to the last byte (and what the proxy does after it): direct {whole:.1f} ms; a swipe adds "
                f"{row['proxy_swipe:whole']['p50_ms'] - whole:.1f} ms, a new message "
                f"{row['proxy_new_message:whole']['p50_ms'] - whole:.1f} ms"
            )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--stacks", default="sqlite,postgres")
    parser.add_argument("--repeats", type=int, default=12)
    parser.add_argument("--window", type=int, default=20, help="turns of chat the front end sends")
    parser.add_argument("--bulk-embedder", choices=("hashing", "real"), default="hashing")
    parser.add_argument("--pg-db", default="axiom_turnpath_bench")
    parser.add_argument("--profile", default="", help="operations to profile with cProfile (comma-separated)")
    parser.add_argument(
        "--queries",
        default="",
        help="operations whose SQL queries to count by origin (comma-separated; in the same operation as --profile, "
        "the counting shows in the profile)",
    )
    parser.add_argument("--profile-lines", type=int, default=35)
    parser.add_argument("--profile-dump", default="", help="a directory to write each profile to (pstats files)")
    parser.add_argument("--json", default="")
    parser.add_argument("--stack", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args()
    args.profile = [p for p in args.profile.split(",") if p]
    args.queries = [p for p in args.queries.split(",") if p]
    if args.stack:
        return run_stack(args)
    results = []
    for stack in args.stacks.split(","):
        out = Path(tempfile.mkdtemp(prefix="axiom-bench-turnpath-")) / f"{stack}.json"
        child = [
            sys.executable,
            __file__,
            "--stack",
            stack,
            "--out",
            str(out),
            "--sizes",
            args.sizes,
            "--repeats",
            str(args.repeats),
            "--window",
            str(args.window),
            "--bulk-embedder",
            args.bulk_embedder,
            "--pg-db",
            args.pg_db,
            "--profile",
            ",".join(args.profile),
            "--queries",
            ",".join(args.queries),
            "--profile-lines",
            str(args.profile_lines),
            "--profile-dump",
            args.profile_dump,
        ]
        code = subprocess.call(child)
        if code:
            return code
        results += json.loads(out.read_text())
    load = os.getloadavg()
    print_table(results)
    print(f"\nload average at the end {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps({"load_average_end": load, "results": results}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

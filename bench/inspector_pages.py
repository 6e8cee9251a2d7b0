"""Benchmark: server time and query counts of the playtesting and memory-inspector pages.

Save: 1,000 turns (events, state, two jobs each), 10,000 facts, 2,000 beliefs (1-8 sources
each, with a history trail), 50 mental models, and 50,000 vector chunks with synthetic
384-dimensional vectors (the query itself is embedded by the packaged MiniLM, as in play).

Each page is requested through Django's test client by a logged-in playtester (the whole
request: middleware, views, templates; no network), `--repeat` times after one warm-up;
p50/p95 and the number of SQL queries are printed. The same page on a 10-turn save gives
the query count that must not grow (no N+1). Beside each page, the raw floor measured in
the same run: the page's main SQL read (`list()` of the same rows) for the database pages,
and a raw Chroma `collection.query` + a rank-bm25 scoring of the same filtered corpus for
the playground.

Usage (from the project root):
    .venv/bin/python bench/inspector_pages.py [--repeat 20]
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/axiom_bench_pages .venv/bin/python bench/inspector_pages.py
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
TMP = Path(tempfile.mkdtemp(prefix="axiom-bench-pages-"))
os.environ.setdefault("SECRET_KEY", "bench-not-secret")
# Production-like: DEBUG off (no query log kept), HTTPS redirects off for the test client.
os.environ["DEBUG"] = "0"
os.environ.setdefault("ALLOWED_HOSTS", "testserver,localhost,127.0.0.1")
for name in ("SECURE_SSL_REDIRECT", "SESSION_COOKIE_SECURE", "CSRF_COOKIE_SECURE"):
    os.environ[name] = "0"
os.environ["AXIOM_VAR_DIR"] = str(TMP / "var")
os.environ.setdefault("DATABASE_URL", f"sqlite:///{TMP / 'bench.sqlite3'}")
os.environ["CHROMA_PATH"] = str(TMP / "chroma")
os.environ.pop("CHROMA_HOST", None)
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")
os.environ.setdefault("LOG_LEVEL", "WARNING")
os.environ["DJANGO_SETTINGS_MODULE"] = "studio.settings"

import django  # noqa: E402

django.setup()

import numpy as np  # noqa: E402
from django.conf import settings  # noqa: E402
from django.contrib.auth.models import Group, User  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.db import connection  # noqa: E402
from django.test import Client  # noqa: E402
from django.test.utils import CaptureQueriesContext  # noqa: E402
from django.urls import reverse  # noqa: E402

TURNS, FACTS, BELIEFS, MODELS, CHUNKS = 1000, 10_000, 2_000, 50, 50_000
DIM = 384
NAMES = [
    f"{a}{b}"
    for a in ("Ka", "Mi", "Io", "An", "Te", "Ly", "Br", "Od", "Se", "Um")
    for b in ("el", "ra", "vo", "na", "o")
]
WORDS = (
    "harbour storm silver crown debt smuggler lantern fog tide contraband ledger oath blade rope "
    "tavern cellar map compass gull reef anchor merchant guard captain letter seal wax bell tower"
).split()


def words(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n))


def build_save(universe, name: str, *, turns: int, facts: int, beliefs: int, models: int, seed: int):
    """Create a save with bulk inserts (the derived columns set as the models' save() would)."""
    from studio.memory.models import Fact, Job, JobKind, JobStatus, MentalModel, Observation
    from studio.memory.models import entity_index_for, subject_key_for
    from studio.world.models import Event, Save, StateCache

    rng = random.Random(seed)
    save = Save.objects.create(universe=universe, name=name, memory_mode="living", current_turn=turns)
    Event.objects.bulk_create(
        (
            Event(
                game_save=save,
                turn_id=t,
                player_input=f"I {words(rng, 4)}.",
                narrative=f"{rng.choice(NAMES)} {words(rng, 60)}.",
            )
            for t in range(1, turns + 1)
        ),
        batch_size=1000,
    )
    StateCache.objects.bulk_create(
        (StateCache(game_save=save, turn_id=t, state={"turn": t}) for t in range(1, turns + 1)), batch_size=1000
    )
    Job.objects.bulk_create(
        (
            Job(kind=kind, game_save=save, universe=universe, turn_id=t, status=JobStatus.DONE)
            for t in range(1, turns + 1)
            for kind in (JobKind.EMBED_TURN, JobKind.LIVING_TURN)
        ),
        batch_size=1000,
    )
    fact_rows = []
    for i in range(facts):
        entities = rng.sample(NAMES, 2)
        fact_rows.append(
            Fact(
                game_save=save,
                turn_id=1 + i * turns // facts,
                statement=f"{entities[0]} {words(rng, 8)} {entities[1]}.",
                fact_type=rng.choice(["world", "experience", "opinion"]),
                who=entities[0],
                what=words(rng, 3),
                entities=entities,
                entity_index=entity_index_for(entities),
            )
        )
    Fact.objects.bulk_create(fact_rows, batch_size=1000)
    fact_turns = list(Fact.objects.filter(game_save=save).values_list("pk", "turn_id"))
    belief_rows = []
    for _ in range(beliefs):
        subject = rng.choice(NAMES)
        sources = sorted(
            ({"fact_id": f, "turn_id": t} for f, t in rng.sample(fact_turns, rng.randint(1, 8))),
            key=lambda s: s["turn_id"],
        )
        statement = f"{subject} {words(rng, 7)}."
        history = [
            {
                "action": "CREATE",
                "turn_id": sources[0]["turn_id"],
                "statement": statement,
                "subject": subject,
                "sources_added": sources[:1],
            }
        ]
        history += [
            {
                "action": "UPDATE",
                "turn_id": s["turn_id"],
                "statement": statement,
                "subject": subject,
                "sources_added": [s],
            }
            for s in sources[1:]
        ]
        belief_rows.append(
            Observation(
                game_save=save,
                statement=statement,
                subject=subject,
                subject_key=subject_key_for(subject),
                proof_count=len(sources),
                sources=sources,
                history=history,
                created_turn_id=sources[0]["turn_id"],
                updated_turn_id=sources[-1]["turn_id"],
                last_source_turn=sources[-1]["turn_id"],
                stale=rng.random() < 0.05,
            )
        )
    Observation.objects.bulk_create(belief_rows, batch_size=1000)
    belief_ids = list(Observation.objects.filter(game_save=save).values_list("pk", "subject_key"))
    MentalModel.objects.bulk_create(
        MentalModel(
            game_save=save,
            subject=subject,
            subject_key=subject_key_for(subject),
            summary=f"{subject}: {words(rng, 40)}.",
            sources=[pk for pk, key in belief_ids if key == subject_key_for(subject)][:40],
            created_turn_id=10,
            updated_turn_id=turns - 5,
            stale=rng.random() < 0.2,
            versions=[{"turn_id": turns - 5, "summary": "x", "sources": []}],
        )
        for subject in NAMES[:models]
    )
    return save


def fill_chunks(memory, save_id: str, *, chunks: int, turns: int, seed: int) -> None:
    """Add `chunks` chunks with synthetic vectors straight into the save's own collection.

    Uses `VectorMemory.collection_for(save_id)` (the per-scope collection, see
    docs/retrieval.md) with the metadata `embed_chunks` writes, then
    `note_external_write(save_id)` so every process's corpus cache reloads.
    """
    rng = random.Random(seed)
    # Clustered, like sentence embeddings (pure Gaussian noise is a worst case no text
    # model produces): 256 topic directions, each chunk one of them plus noise.
    generator = np.random.default_rng(seed)
    centres = generator.standard_normal((256, DIM)).astype(np.float32)
    vectors = centres[generator.integers(0, 256, chunks)] + 0.35 * generator.standard_normal((chunks, DIM)).astype(
        np.float32
    )
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    collection = memory.collection_for(save_id)
    per_turn = chunks // turns
    ids, docs, metas = [], [], []
    for i in range(chunks):
        turn = 1 + i // per_turn if i < per_turn * turns else turns
        ids.append(f"{save_id}-{i}")
        docs.append(f"{rng.choice(NAMES)} {words(rng, 30)}.")
        metas.append(
            {
                "save_id": save_id,
                "turn_id": turn,
                "chunk_type": "narrative",
                "chunk_seq": i,
                "chunk_part": 0,
                "chunk_parts": 1,
            }
        )
    for start in range(0, chunks, 5000):
        collection.add(
            ids=ids[start : start + 5000],
            documents=docs[start : start + 5000],
            metadatas=metas[start : start + 5000],
            embeddings=vectors[start : start + 5000],
        )
    memory.note_external_write(save_id)


def measure(client: Client, url: str, repeat: int) -> dict:
    client.get(url)  # warm-up (session, caches, templates)
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        response = client.get(url)
        samples.append(time.perf_counter() - start)
        assert response.status_code == 200, (url, response.status_code)
    with CaptureQueriesContext(connection) as queries:
        client.get(url)
    ordered = sorted(samples)
    return {
        "p50": statistics.median(samples) * 1000,
        "p95": ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))] * 1000,
        "queries": len(queries),
    }


def time_raw(fn, repeat: int) -> float:
    fn()
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--skip-vector", action="store_true", help="database pages only (no chunks, no playground)")
    args = parser.parse_args()
    skip_vector = args.skip_vector
    call_command("migrate", verbosity=0)
    print(f"load average at start: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores (other processes skew the times)")

    from studio.memory.models import Fact, Observation
    from studio.memory.vector import get_vector_memory
    from studio.roles import PLAYTESTERS
    from studio.world.models import Universe

    user = User.objects.create_user("bench-playtester", password="x")
    user.groups.add(Group.objects.get(name=PLAYTESTERS))
    universe = Universe.objects.create(name="Bench", slug="bench", owner=user)
    t0 = time.perf_counter()
    big = build_save(universe, "big", turns=TURNS, facts=FACTS, beliefs=BELIEFS, models=MODELS, seed=1)
    small = build_save(universe, "small", turns=10, facts=100, beliefs=20, models=5, seed=2)
    print(
        f"database rows built in {time.perf_counter() - t0:.1f} s ({settings.DATABASES['default']['ENGINE'].rsplit('.', 1)[-1]})"
    )
    memory = None
    if not skip_vector:
        memory = get_vector_memory()
        t0 = time.perf_counter()
        fill_chunks(memory, big.save_id, chunks=CHUNKS, turns=TURNS, seed=3)
        fill_chunks(memory, small.save_id, chunks=200, turns=10, seed=4)
        print(f"{CHUNKS} chunks with synthetic vectors added in {time.perf_counter() - t0:.1f} s")

    client = Client()
    client.force_login(user)
    heavy_belief = Observation.objects.filter(game_save=big).order_by("-proof_count", "id").first()
    small_belief = Observation.objects.filter(game_save=small).order_by("-proof_count", "id").first()
    entity = NAMES[3]

    def pages(save, belief):
        sid = save.save_id
        return [
            ("saves list", reverse("saves:list")),
            ("console", reverse("saves:detail", args=[sid])),
            ("timeline (page 1)", reverse("saves:timeline", args=[sid])),
            ("timeline (htmx, page 20)", reverse("saves:timeline", args=[sid]) + "?page=20"),
            ("facts", reverse("memory:facts", args=[sid])),
            (
                "facts (entity + turns)",
                reverse("memory:facts", args=[sid]) + f"?entity={entity}&turn_from=2&turn_to=900",
            ),
            ("facts (search)", reverse("memory:facts", args=[sid]) + "?q=lantern"),
            ("beliefs", reverse("memory:beliefs", args=[sid])),
            ("beliefs (one subject)", reverse("memory:beliefs", args=[sid]) + f"?subject={entity}"),
            ("belief page", reverse("memory:belief_detail", args=[sid, belief.pk])),
            ("mental models", reverse("memory:mental_models", args=[sid])),
            (
                "rewind preview (10 turns back)",
                reverse("saves:rewind_preview", args=[sid]) + f"?turn={save.current_turn - 10}",
            ),
        ] + (
            []
            if skip_vector
            else [
                (
                    "playground query (k=5)",
                    reverse("memory:playground", args=[sid]) + "?q=silver+crown+smuggler+harbour&k=5",
                ),
                (
                    "context viewer",
                    reverse("memory:context", args=[sid]) + f"?q={entity}+asks+about+the+silver+crown&budget=1200",
                ),
            ]
        )

    if not skip_vector:
        # Cold first query: loads the embedding model and builds the 50k-chunk BM25 index once.
        t0 = time.perf_counter()
        client.get(reverse("memory:playground", args=[big.save_id]) + "?q=lantern&k=5")
        cold = (time.perf_counter() - t0) * 1000
        print(f"first playground query (loads MiniLM, builds the 50k-chunk index): {cold:.0f} ms")

    small_counts = {name: measure(client, url, 2)["queries"] for name, url in pages(small, small_belief)}
    print(f"\n{'page':34} {'p50 ms':>8} {'p95 ms':>8} {'queries':>8} {'10-turn save':>13}")
    results = {}
    for name, url in pages(big, heavy_belief):
        r = measure(client, url, args.repeat)
        results[name] = r
        flag = "" if r["queries"] == small_counts[name] else "  <- grows"
        print(f"{name:34} {r['p50']:8.1f} {r['p95']:8.1f} {r['queries']:8d} {small_counts[name]:13d}{flag}")
        if name.startswith("playground") and memory is not None and memory.last_query_stats is not None:
            timings = memory.last_query_stats.timings_ms
            print(
                f"{'':34} of which VectorMemory.query_explained {timings.get('total', 0):.1f} ms: "
                + ", ".join(f"{k} {v:.1f}" for k, v in timings.items() if k != "total")
            )

    # Raw floors measured in the same run.
    from studio.memory.selectors import fact_list

    raw = {
        "facts": time_raw(
            lambda: list(Fact.objects.filter(game_save=big).order_by("-turn_id", "-id")[:50]), args.repeat
        ),
        "facts (entity + turns)": time_raw(
            lambda: list(fact_list(game_save=big, entity=entity, turn_from=100, turn_to=900)[:50]), args.repeat
        ),
        "beliefs": time_raw(
            lambda: list(Observation.objects.filter(game_save=big).order_by("subject_key", "-proof_count")[:50]),
            args.repeat,
        ),
        "timeline (page 1)": time_raw(lambda: list(big.events.order_by("-turn_id")[:20]), args.repeat),
    }
    print("\nraw floors (same run):")
    for name, ms in raw.items():
        print(f"  {name:32} raw SQL {ms:7.2f} ms   page/raw {results[name]['p50'] / ms:6.1f}x")
    over = [name for name, r in results.items() if r["p50"] >= 200]
    if skip_vector:
        print("\nall pages under 200 ms p50" if not over else f"\nover 200 ms p50: {', '.join(over)}")
        print(f"load average at end: {os.getloadavg()[0]:.1f}")
        return
    from rank_bm25 import BM25Okapi

    from studio.memory.embeddings import embedding

    embedder = embedding.get_embedder()
    collection = memory.collection_for(big.save_id)
    query = "silver crown smuggler harbour"
    query_vector = embedder.encode([query])[0] if embedder is not None else np.zeros(DIM, dtype=np.float32)
    # The save's own collection; the horizon is the current turn, which cuts nothing, so the
    # cheapest raw equivalent of the engine's semantic arm is a query without `where`.
    raw_semantic = time_raw(lambda: collection.query(query_embeddings=[query_vector], n_results=50), args.repeat)
    docs = collection.get(include=["documents"], limit=CHUNKS)["documents"]
    bm25 = BM25Okapi([d.lower().split() for d in docs])
    raw_bm25 = time_raw(lambda: bm25.get_scores(query.split()), args.repeat)
    raw_embed = time_raw(lambda: embedder.encode([query]), args.repeat) if embedder is not None else float("nan")
    floor = raw_semantic + raw_bm25 + raw_embed
    print(
        f"  playground query: raw Chroma query {raw_semantic:.1f} ms + raw rank-bm25 over {len(docs)} docs {raw_bm25:.1f} ms"
        f" + MiniLM query embedding {raw_embed:.1f} ms = {floor:.1f} ms; page/raw {results['playground query (k=5)']['p50'] / floor:.2f}x"
    )
    print("\nall pages under 200 ms p50" if not over else f"\nover 200 ms p50: {', '.join(over)}")
    print(f"load average at end: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()

"""Benchmark: rewind a large save, database part and vector part separately.

Save: 1,000 turns (events + state), 10,000 facts, 2,000 beliefs (each updated 0-3 times,
citing 1-8 facts), 50 mental models (refreshed every ~40 turns), 20,000 vector chunks.
Rewind to turn 500.

- Database part: `CheckpointManager.rewind` (one transaction), beside the floor of the plain
  SQL DELETEs of the same rows (events, state, facts, beliefs and models created after N)
  run on an identical save, which does no belief or model restoration.
- Vector part: the after-commit delete through `studio.memory.vector` when that module is
  present (VectorMemory over a fresh PersistentClient directory), beside a raw Chroma
  `collection.delete(where=...)` on an identical collection. Chunks carry synthetic
  384-dimensional vectors (embedding 20,000 texts would measure the model, not the delete).

Usage (from the project root):
    .venv/bin/python bench/rewind.py                      # SQLite in a temporary file
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/axiom_bench .venv/bin/python bench/rewind.py
Options: --repeat N (default 3; the median is reported), --skip-vector.
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

TMP = Path(tempfile.mkdtemp(prefix="axiom-bench-rewind-"))
os.environ.setdefault("SECRET_KEY", "bench-not-secret")
os.environ.setdefault("AXIOM_VAR_DIR", str(TMP / "var"))
os.environ.setdefault("DATABASE_URL", f"sqlite:///{TMP / 'bench.sqlite3'}")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "studio.settings")

import django  # noqa: E402

django.setup()

from django.core.management import call_command  # noqa: E402
from django.db import connection, transaction  # noqa: E402

from studio.memory.models import Fact, MentalModel, Observation, entity_index_for, subject_key_for  # noqa: E402
from studio.saves.checkpoints import CheckpointManager  # noqa: E402
from studio.world.models import Event, Save, StateCache, Universe  # noqa: E402

TURNS, FACTS, BELIEFS, MODELS, CHUNKS, TARGET = 1000, 10_000, 2_000, 50, 20_000, 500
DIM = 384
NAMES = ["Kael", "Mira", "Ivo", "Ana", "Teo", "Lys", "Bran", "Oda", "Sef", "Uma"]


def build_save(universe: Universe, save_id: str, seed: int) -> Save:
    """Create the benchmark save with bulk inserts (derived columns set by hand)."""
    rng = random.Random(seed)
    save = Save.objects.create(
        universe=universe, name=save_id, save_id=save_id, memory_mode="living", current_turn=TURNS
    )
    Event.objects.bulk_create(
        [
            Event(game_save=save, turn_id=t, player_input=f"act {t}", narrative=f"Narrative of turn {t}. " * 8)
            for t in range(1, TURNS + 1)
        ],
        batch_size=1000,
    )
    StateCache.objects.bulk_create(
        [
            StateCache(game_save=save, turn_id=t, state={"turn": t, "gold": t * 3, "flags": ["a", "b"]})
            for t in range(1, TURNS + 1)
        ],
        batch_size=1000,
    )
    per_turn = FACTS // TURNS
    facts = []
    for t in range(1, TURNS + 1):
        for i in range(per_turn):
            entities = rng.sample(NAMES, 2)
            facts.append(
                Fact(
                    game_save=save,
                    turn_id=t,
                    statement=f"Fact {i} of turn {t}: {entities[0]} met {entities[1]}.",
                    who=entities[0],
                    what="met",
                    entities=entities,
                    entity_index=entity_index_for(entities),
                )
            )
    created = Fact.objects.bulk_create(facts, batch_size=2000)
    fact_turns = [(f.pk, f.turn_id) for f in created]  # ordered by turn

    def cite(upto_turn: int, k: int) -> list[dict]:
        hi = upto_turn * per_turn
        return [{"fact_id": fid, "turn_id": turn} for fid, turn in rng.sample(fact_turns[:hi], min(k, hi))]

    beliefs = []
    for b in range(BELIEFS):
        created_turn = rng.randint(1, TURNS)
        subject = rng.choice(NAMES + [""])
        sources = cite(created_turn, rng.randint(1, 4))
        history = [
            {
                "action": "CREATE",
                "turn_id": created_turn,
                "statement": f"Belief {b} v0",
                "subject": subject,
                "sources_added": sources,
            }
        ]
        turn = created_turn
        for v in range(rng.randint(0, 3)):
            turn = rng.randint(turn, TURNS)
            added = [s for s in cite(turn, rng.randint(1, 2)) if s["fact_id"] not in {x["fact_id"] for x in sources}]
            sources = sources + added
            history.append(
                {
                    "action": "UPDATE",
                    "turn_id": turn,
                    "statement": f"Belief {b} v{v + 1}",
                    "subject": subject,
                    "sources_added": added,
                }
            )
        beliefs.append(
            Observation(
                game_save=save,
                statement=history[-1]["statement"],
                subject=subject,
                subject_key=subject_key_for(subject),
                proof_count=len(sources),
                sources=sources,
                history=history,
                created_turn_id=created_turn,
                updated_turn_id=turn,
                last_source_turn=max(s["turn_id"] for s in sources),
            )
        )
    belief_rows = Observation.all_objects.bulk_create(beliefs, batch_size=1000)
    belief_ids = [b.pk for b in belief_rows]
    models = []
    for m in range(MODELS):
        subject = f"{NAMES[m % len(NAMES)]} {m}"
        created_turn = rng.randint(1, TURNS)
        versions = []
        for turn in range(created_turn, TURNS + 1, 40):
            versions.append({"turn_id": turn, "summary": f"Model {m} at {turn}", "sources": rng.sample(belief_ids, 5)})
        models.append(
            MentalModel(
                game_save=save,
                subject=subject,
                subject_key=subject_key_for(subject),
                summary=versions[-1]["summary"],
                sources=versions[-1]["sources"],
                versions=versions,
                created_turn_id=created_turn,
                updated_turn_id=versions[-1]["turn_id"],
            )
        )
    MentalModel.objects.bulk_create(models)
    return save


def raw_sql_floor(save: Save) -> float:
    """Time the plain DELETEs of the rows created after the target (no restoration)."""
    statements = [
        ("saves_event", "turn_id"),
        ("saves_statecache", "turn_id"),
        ("memory_fact", "turn_id"),
        ("memory_observation", "created_turn_id"),
        ("memory_mentalmodel", "created_turn_id"),
    ]
    started = time.perf_counter()
    with transaction.atomic(), connection.cursor() as cursor:
        for table, column in statements:
            cursor.execute(f"DELETE FROM {table} WHERE game_save_id = %s AND {column} > %s", [save.pk, TARGET])
        cursor.execute("UPDATE saves_save SET current_turn = %s WHERE id = %s", [TARGET, save.pk])
    return time.perf_counter() - started


def chroma_fill(collection, save_id: str, seed: int):
    """Add CHUNKS chunks (20 per turn) with synthetic vectors to `collection`."""
    import numpy as np

    rng = np.random.default_rng(seed)
    per_turn = CHUNKS // TURNS
    batch = 5000
    ids, docs, metas = [], [], []
    for t in range(1, TURNS + 1):
        for i in range(per_turn):
            ids.append(f"{save_id}-{t}-{i}")
            docs.append(f"Chunk {i} of turn {t}.")
            metas.append({"save_id": save_id, "turn_id": t, "chunk_type": "narrative"})
    vectors = rng.standard_normal((len(ids), DIM)).astype("float32")
    for start in range(0, len(ids), batch):
        collection.add(
            ids=ids[start : start + batch],
            documents=docs[start : start + batch],
            metadatas=metas[start : start + batch],
            embeddings=vectors[start : start + batch],
        )
    return collection


def raw_chroma_delete(r: int) -> float:
    """Time a raw Chroma delete of the later half of an identical 20,000-chunk collection."""
    import chromadb
    from chromadb.config import Settings

    client = chromadb.PersistentClient(path=str(TMP / f"chroma-raw-{r}"), settings=Settings(anonymized_telemetry=False))
    collection = client.get_or_create_collection(
        "narrative_memory", embedding_function=None, configuration={"hnsw": {"space": "cosine"}}
    )
    chroma_fill(collection, "bench", seed=r)
    started = time.perf_counter()
    collection.delete(where={"$and": [{"save_id": "bench"}, {"turn_id": {"$gt": TARGET}}]})
    seconds = time.perf_counter() - started
    assert collection.count() == CHUNKS // 2, collection.count()
    return seconds


def vector_memory_for(r: int, save_id: str, skip: bool):
    """Return (a VectorMemory filled with the save's chunks, None) or (None, why not)."""
    if skip:
        return None, "skipped (--skip-vector)"
    try:
        from studio.memory.vector import VectorMemory
    except Exception as exc:  # a teammate's module; report rather than fail
        return None, f"studio.memory.vector unavailable: {type(exc).__name__}: {exc}"
    memory = VectorMemory(str(TMP / f"chroma-ours-{r}"))
    # Filled through the store's own collection: synthetic vectors, no embedding.
    chroma_fill(memory.collection_for(save_id), save_id, seed=r)  # the save's own collection
    return memory, ""


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--skip-vector", action="store_true")
    args = ap.parse_args()
    call_command("migrate", verbosity=0)
    vendor = connection.vendor
    universe, _ = Universe.objects.get_or_create(slug="bench-rewind", defaults={"name": "Bench rewind"})
    Save.objects.filter(universe=universe).delete()

    class NoVectors:
        def rollback(self, save_id, target_turn_id):
            return 0

    db_times, vector_times, raw_times, floor_times, build_times = [], [], [], [], []
    counts, why_not = None, ""
    for r in range(args.repeat):
        started = time.perf_counter()
        save = build_save(universe, f"bench-{r}", seed=r)
        twin = build_save(universe, f"bench-floor-{r}", seed=r)
        build_times.append(time.perf_counter() - started)
        memory, why_not = vector_memory_for(r, save.save_id, args.skip_vector)
        try:
            # No outer transaction: the vector delete runs right after commit, timed apart.
            result = CheckpointManager(vector_memory=memory or NoVectors()).rewind(save, TARGET)
        finally:
            if memory is not None:
                memory.close()
        assert not result.vector_pending, result.vector_error
        db_times.append(result.db_seconds)
        if memory is not None:
            vector_times.append(result.vector_seconds)
            assert result.counts["vector_chunks"] == CHUNKS // 2, result.counts
        counts = result.counts
        floor_times.append(raw_sql_floor(twin))
        if not args.skip_vector:
            raw_times.append(raw_chroma_delete(r))
    Save.objects.filter(universe=universe).delete()

    def runs(values):
        return ", ".join(f"{t * 1000:.0f}" for t in values)

    db, floor = statistics.median(db_times), statistics.median(floor_times)
    print(f"database: {vendor} ({connection.settings_dict['NAME']})")
    print(
        f"save: {TURNS} turns, {FACTS} facts, {BELIEFS} beliefs, {MODELS} mental models, {CHUNKS} chunks; rewind to {TARGET}"
    )
    print(f"build (two saves): median {statistics.median(build_times):.1f} s")
    print(f"counts: {counts}")
    print(f"DB part, CheckpointManager.rewind transaction: median {db * 1000:.0f} ms  (runs: {runs(db_times)})")
    print(f"DB floor, raw SQL DELETEs only (no restoration): median {floor * 1000:.0f} ms  (runs: {runs(floor_times)})")
    print(f"ratio rewind / raw floor: {db / floor:.1f}x;  target DB part < 1000 ms: {'met' if db < 1 else 'NOT met'}")
    if args.skip_vector:
        return 0
    raw = statistics.median(raw_times)
    print(f"vector: {CHUNKS} chunks ({DIM}-d synthetic vectors), delete turn_id > {TARGET} ({CHUNKS // 2} chunks)")
    if vector_times:
        ours = statistics.median(vector_times)
        print(
            f"vector part, after commit via VectorMemory.rollback: median {ours * 1000:.0f} ms  (runs: {runs(vector_times)})"
        )
    else:
        print(f"vector part: not measured ({why_not})")
    print(f"vector raw Chroma collection.delete(where=...):      median {raw * 1000:.0f} ms  (runs: {runs(raw_times)})")
    if vector_times:
        print(f"ratio VectorMemory.rollback / raw Chroma delete: {ours / raw:.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

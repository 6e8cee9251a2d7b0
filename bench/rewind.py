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
from studio.saves.models import Event, Save, StateCache  # noqa: E402
from studio.universes.models import Universe  # noqa: E402

TURNS, FACTS, BELIEFS, MODELS, CHUNKS, TARGET = 1000, 10_000, 2_000, 50, 20_000, 500
DIM = 384
NAMES = ["Kael", "Mira", "Ivo", "Ana", "Teo", "Lys", "Bran", "Oda", "Sef", "Uma"]


def build_save(universe: Universe, save_id: str, seed: int) -> Save:
    """Create the benchmark save with bulk inserts (derived columns set by hand)."""
    rng = random.Random(seed)
    save = Save.objects.create(universe=universe, name=save_id, save_id=save_id, memory_mode="living",
                               current_turn=TURNS)
    Event.objects.bulk_create(
        [Event(game_save=save, turn_id=t, player_input=f"act {t}", narrative=f"Narrative of turn {t}. " * 8)
         for t in range(1, TURNS + 1)], batch_size=1000)
    StateCache.objects.bulk_create(
        [StateCache(game_save=save, turn_id=t, state={"turn": t, "gold": t * 3, "flags": ["a", "b"]})
         for t in range(1, TURNS + 1)], batch_size=1000)
    per_turn = FACTS // TURNS
    facts = []
    for t in range(1, TURNS + 1):
        for i in range(per_turn):
            entities = rng.sample(NAMES, 2)
            facts.append(Fact(game_save=save, turn_id=t, statement=f"Fact {i} of turn {t}: {entities[0]} met {entities[1]}.",
                              who=entities[0], what="met", entities=entities, entity_index=entity_index_for(entities)))
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
        history = [{"action": "CREATE", "turn_id": created_turn, "statement": f"Belief {b} v0", "subject": subject,
                    "sources_added": sources}]
        turn = created_turn
        for v in range(rng.randint(0, 3)):
            turn = rng.randint(turn, TURNS)
            added = [s for s in cite(turn, rng.randint(1, 2)) if s["fact_id"] not in {x["fact_id"] for x in sources}]
            sources = sources + added
            history.append({"action": "UPDATE", "turn_id": turn, "statement": f"Belief {b} v{v + 1}",
                            "subject": subject, "sources_added": added})
        beliefs.append(Observation(
            game_save=save, statement=history[-1]["statement"], subject=subject, subject_key=subject_key_for(subject),
            proof_count=len(sources), sources=sources, history=history, created_turn_id=created_turn,
            updated_turn_id=turn, last_source_turn=max(s["turn_id"] for s in sources)))
    belief_rows = Observation.all_objects.bulk_create(beliefs, batch_size=1000)
    belief_ids = [b.pk for b in belief_rows]
    models = []
    for m in range(MODELS):
        subject = f"{NAMES[m % len(NAMES)]} {m}"
        created_turn = rng.randint(1, TURNS)
        versions = []
        for turn in range(created_turn, TURNS + 1, 40):
            versions.append({"turn_id": turn, "summary": f"Model {m} at {turn}", "sources": rng.sample(belief_ids, 5)})
        models.append(MentalModel(
            game_save=save, subject=subject, subject_key=subject_key_for(subject), summary=versions[-1]["summary"],
            sources=versions[-1]["sources"], versions=versions, created_turn_id=created_turn,
            updated_turn_id=versions[-1]["turn_id"]))
    MentalModel.objects.bulk_create(models)
    return save


def raw_sql_floor(save: Save) -> float:
    """Time the plain DELETEs of the rows created after the target (no restoration)."""
    statements = [
        ("saves_event", "turn_id"), ("saves_statecache", "turn_id"), ("memory_fact", "turn_id"),
        ("memory_observation", "created_turn_id"), ("memory_mentalmodel", "created_turn_id"),
    ]
    started = time.perf_counter()
    with transaction.atomic(), connection.cursor() as cursor:
        for table, column in statements:
            cursor.execute(f"DELETE FROM {table} WHERE game_save_id = %s AND {column} > %s", [save.pk, TARGET])
        cursor.execute("UPDATE saves_save SET current_turn = %s WHERE id = %s", [TARGET, save.pk])
    return time.perf_counter() - started


def chroma_fill(client, save_id: str, seed: int):
    import numpy as np

    collection = client.get_or_create_collection("narrative_memory", embedding_function=None,
                                                 metadata={"hnsw:space": "cosine"})
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
        collection.add(ids=ids[start:start + batch], documents=docs[start:start + batch],
                       metadatas=metas[start:start + batch], embeddings=vectors[start:start + batch])
    return collection


def vector_part(repeat: int) -> dict:
    import chromadb
    from chromadb.config import Settings

    out = {"raw": [], "ours": [], "ours_available": False, "deleted": None}
    try:
        from studio.memory import vector as vector_module
        out["ours_available"] = hasattr(vector_module, "VectorMemory")
    except Exception as exc:  # the module is a teammate's, and may not be there yet
        out["why_not"] = f"{type(exc).__name__}: {exc}"
    for r in range(repeat):
        raw_dir = TMP / f"chroma-raw-{r}"
        client = chromadb.PersistentClient(path=str(raw_dir), settings=Settings(anonymized_telemetry=False))
        collection = chroma_fill(client, "bench", seed=r)
        started = time.perf_counter()
        collection.delete(where={"$and": [{"save_id": "bench"}, {"turn_id": {"$gt": TARGET}}]})
        out["raw"].append(time.perf_counter() - started)
        assert collection.count() == CHUNKS // 2, collection.count()
        if out["ours_available"]:
            ours_dir = TMP / f"chroma-ours-{r}"
            fill_client = chromadb.PersistentClient(path=str(ours_dir), settings=Settings(anonymized_telemetry=False))
            chroma_fill(fill_client, "bench", seed=r)
            memory = vector_module.VectorMemory(str(ours_dir))
            started = time.perf_counter()
            deleted = memory.rollback("bench", TARGET)
            out["ours"].append(time.perf_counter() - started)
            out["deleted"] = deleted
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--skip-vector", action="store_true")
    args = ap.parse_args()
    call_command("migrate", verbosity=0)
    vendor = connection.vendor
    universe, _ = Universe.objects.get_or_create(slug="bench-rewind", defaults={"name": "Bench rewind"})
    Save.objects.filter(universe=universe).delete()

    class NoVectors:  # the DB part is timed alone; the vector part below
        def rollback(self, save_id, target_turn_id):
            return 0

    db_times, floor_times, build_times = [], [], []
    counts = None
    for r in range(args.repeat):
        started = time.perf_counter()
        save = build_save(universe, f"bench-{r}", seed=r)
        twin = build_save(universe, f"bench-floor-{r}", seed=r)
        build_times.append(time.perf_counter() - started)
        result = CheckpointManager(vector_memory=NoVectors()).rewind(save, TARGET)
        db_times.append(result.db_seconds)
        counts = result.counts
        floor_times.append(raw_sql_floor(twin))
    Save.objects.filter(universe=universe).delete()

    db, floor = statistics.median(db_times), statistics.median(floor_times)
    print(f"database: {vendor} ({connection.settings_dict['NAME']})")
    print(f"save: {TURNS} turns, {FACTS} facts, {BELIEFS} beliefs, {MODELS} mental models; rewind to {TARGET}")
    print(f"build (two saves): median {statistics.median(build_times):.1f} s")
    print(f"counts: {counts}")
    print(f"DB part, CheckpointManager.rewind: median {db * 1000:.0f} ms  (runs: {', '.join(f'{t * 1000:.0f}' for t in db_times)})")
    print(f"DB floor, raw SQL DELETEs only:    median {floor * 1000:.0f} ms  (runs: {', '.join(f'{t * 1000:.0f}' for t in floor_times)})")
    print(f"ratio rewind / raw floor: {db / floor:.1f}x;  target < 1000 ms: {'met' if db < 1 else 'NOT met'}")
    if args.skip_vector:
        return 0
    v = vector_part(args.repeat)
    raw = statistics.median(v["raw"])
    print(f"vector: {CHUNKS} chunks ({DIM}-d synthetic), delete turn_id > {TARGET} ({CHUNKS // 2} chunks)")
    print(f"vector raw Chroma collection.delete(where): median {raw * 1000:.0f} ms  (runs: {', '.join(f'{t * 1000:.0f}' for t in v['raw'])})")
    if v["ours"]:
        ours = statistics.median(v["ours"])
        print(f"vector VectorMemory.rollback:               median {ours * 1000:.0f} ms  (runs: {', '.join(f'{t * 1000:.0f}' for t in v['ours'])}); "
              f"deleted {v['deleted']}; ratio {ours / raw:.2f}x")
    else:
        print(f"vector VectorMemory.rollback: not measured ({v.get('why_not', 'studio.memory.vector has no VectorMemory')})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

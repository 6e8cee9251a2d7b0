"""Rollback of half of a 1,000-turn save's chunks, beside a raw Chroma delete.

A save of 1,000 turns with --per-turn chunks each (plus 50 lore entries at turn 0) is
rolled back to turn 500 with `VectorMemory.rollback`; an identical save is cut with a bare
`collection.delete(where=turn_id > 500)` on its own collection (each save has its own
collection, as in the engine; which of the two goes first alternates). Vectors are random unit vectors (deletion does not look at them). Repeated
--repeat times on fresh saves; medians printed.

    .venv/bin/python bench/rollback_vectors.py [--per-turn 3] [--repeat 3]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import uuid
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import setup_django  # noqa: E402


def fill(collection, batch, save_id, turns, per_turn, rng):
    ids, metadatas, documents = [], [], []
    for turn in range(1, turns + 1):
        for part in range(per_turn):
            ids.append(uuid.uuid4().hex)
            metadatas.append({"save_id": save_id, "turn_id": turn, "chunk_type": "narrative", "chunk_seq": len(ids)})
            documents.append(f"turn {turn} chunk {part}")
    for lore in range(50):
        ids.append(uuid.uuid4().hex)
        metadatas.append({"save_id": save_id, "turn_id": 0, "chunk_type": "lore", "entry_id": f"e{lore}"})
        documents.append(f"lore entry {lore}")
    vectors = rng.normal(size=(len(ids), 384)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    for lo in range(0, len(ids), batch):
        collection.add(
            ids=ids[lo : lo + batch],
            embeddings=vectors[lo : lo + batch],
            documents=documents[lo : lo + batch],
            metadatas=metadatas[lo : lo + batch],
        )
    return len(ids)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--turns", type=int, default=1000)
    parser.add_argument("--per-turn", type=int, default=3)
    parser.add_argument("--repeat", type=int, default=4)
    args = parser.parse_args()

    setup_django()
    from django.conf import settings

    from studio.memory.vector import VectorMemory

    vm = VectorMemory(settings.CHROMA_PATH)
    batch = int(vm.store.client.get_max_batch_size())
    rng = np.random.default_rng(1)
    engine, raw, deleted = [], [], []
    half = args.turns // 2
    for attempt in range(args.repeat):
        # One collection per save (the engine's layout, docs/retrieval.md).
        total = fill(
            vm.collection_for(f"rb-engine-{attempt}"), batch, f"rb-engine-{attempt}", args.turns, args.per_turn, rng
        )
        collection = vm.collection_for(f"rb-raw-{attempt}")
        fill(collection, batch, f"rb-raw-{attempt}", args.turns, args.per_turn, rng)
        vm.note_external_write(f"rb-engine-{attempt}")

        def run_engine():
            start = time.perf_counter()
            deleted.append(vm.rollback(f"rb-engine-{attempt}", half))
            engine.append(time.perf_counter() - start)

        def run_raw():
            start = time.perf_counter()
            collection.delete(where={"turn_id": {"$gt": half}})
            raw.append(time.perf_counter() - start)

        # Alternate which goes first: Chroma keeps persisting the fresh inserts in the
        # background, which slows whichever operation runs first.
        for step in (run_engine, run_raw) if attempt % 2 == 0 else (run_raw, run_engine):
            step()
        left = vm.count(f"rb-engine-{attempt}")
        assert left == total - deleted[-1], (left, total, deleted[-1])
        assert left == vm.count(f"rb-raw-{attempt}")
    e, r = statistics.median(engine) * 1000, statistics.median(raw) * 1000
    print(
        f"\nSave of {args.turns} turns x {args.per_turn} chunks + 50 lore; rollback to turn {half} deletes "
        f"{deleted[0]} chunks; median of {args.repeat}; each save in its own collection.\n"
    )
    print("| operation | median time | ratio |")
    print("|---|---|---|")
    print(f"| raw `collection.delete(where=...)` | {r:.0f} ms | 1.00x |")
    print(f"| `VectorMemory.rollback` (paged id get, delete by ids, version bump) | {e:.0f} ms | {e / r:.2f}x |")
    vm.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())

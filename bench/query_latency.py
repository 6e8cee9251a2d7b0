"""Query latency of VectorMemory.query on saves of 1k, 10k and 100k chunks.

Every save lives in its own Chroma collection (the engine's layout since the per-scope
change, docs/retrieval.md). Per size: p50/p95 over the queries of the engine's
`query(save_id, question, k=10)` (warm: the BM25 indexes are built by a first query, whose
time is printed separately), beside the raw arms on the same corpus measured in the same
run: a bare Chroma query on the save's collection (no `where`, 50 results -- what the
engine's semantic arm sends when no filter cuts chunks) and a bare
`rank_bm25.BM25Okapi.get_scores`, alternating with the engine query by query. The ratio
compares the engine without its query embedding (the raw arms get a ready vector) to the
raw arms' sum; the query embedding is printed as its own column.

Corpus: LoCoMo utterances (read from --data, cycled), 40 per turn. Vectors: the real
MiniLM embeddings of those texts for the 1k and 10k saves; the 100k save uses them with
Gaussian noise added and re-normalised (synthetic, for latency only: embedding 100k chunks
takes ~20 minutes here). Queries: LoCoMo questions.

Layout probe: every save is also copied into one shared collection (the former layout,
"narrative_memory" holding all saves), where a save's query needs `where save_id = X`;
that query is timed beside the per-save one, for the single-collection vs per-save decision.

    .venv/bin/python bench/query_latency.py [--sizes 1000,10000,100000] [--queries 60]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import uuid
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import DEFAULT_LOCOMO, setup_django, summarize_ms  # noqa: E402


def locomo_texts_and_questions(folder: Path):
    texts, questions = [], []
    for path in sorted(folder.glob("*.json")):
        data = json.loads(path.read_text(encoding="utf-8"))
        session = 1
        while f"session_{session}" in data:
            for utterance in data[f"session_{session}"]:
                texts.append(f"{utterance['speaker']}: {utterance['text']}")
            session += 1
        questions.extend(qa["question"] for qa in data["qa"] if qa.get("category") in (1, 2, 3, 4))
    return texts, questions


def timed(fn, repeat):
    samples = []
    for args in repeat:
        start = time.perf_counter()
        fn(*args)
        samples.append(time.perf_counter() - start)
    return samples


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", default=str(DEFAULT_LOCOMO))
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--queries", type=int, default=60)
    parser.add_argument("--per-turn", type=int, default=40)
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]

    setup_django()
    from django.conf import settings
    from rank_bm25 import BM25Okapi

    from studio.memory.embeddings.embedding import get_embedder, query_cache_clear
    from studio.memory.retrieval.lexical import tokenize
    from studio.memory.vector import VectorMemory

    # The same questions repeat across sizes: with the query LRU on they would be cache hits and
    # the engine would skip the embedding the raw arm pays for. Measure every embedding.
    query_cache_clear(maxsize=0)
    vm = VectorMemory(settings.CHROMA_PATH)
    embedder = get_embedder()
    shared = vm.store.client.get_or_create_collection(
        "layout-probe-shared", embedding_function=None, configuration={"hnsw": {"space": "cosine"}}
    )
    base_texts, questions = locomo_texts_and_questions(Path(args.data))
    questions = questions[: args.queries]
    rng = np.random.default_rng(0)

    start = time.perf_counter()
    real_vectors = embedder.encode(base_texts, batch_size=32)
    print(f"embedded {len(base_texts)} texts with MiniLM in {time.perf_counter() - start:.1f} s", file=sys.stderr)
    query_vectors = embedder.encode(questions, batch_size=32)

    batch = int(vm.store.client.get_max_batch_size())
    corpora = {}
    for size in sizes:
        save_id = f"bench-{size}"
        texts = [base_texts[i % len(base_texts)] for i in range(size)]
        picks = real_vectors[np.arange(size) % len(real_vectors)]
        if size <= 10000:
            vectors = picks
        else:
            noisy = picks + rng.normal(0, 0.05, picks.shape).astype(np.float32)
            vectors = noisy / np.linalg.norm(noisy, axis=1, keepdims=True)
        metadatas = [
            {
                "save_id": save_id,
                "turn_id": 1 + i // args.per_turn,
                "chunk_type": "narrative",
                "chunk_seq": i,
                "chunk_part": 0,
                "chunk_parts": 1,
            }
            for i in range(size)
        ]
        start = time.perf_counter()
        ids = [uuid.uuid4().hex for _ in range(size)]
        collection = vm.collection_for(save_id)
        for lo in range(0, size, batch):
            collection.add(
                ids=ids[lo : lo + batch],
                embeddings=vectors[lo : lo + batch],
                documents=texts[lo : lo + batch],
                metadatas=metadatas[lo : lo + batch],
            )
        vm.note_external_write(save_id)
        print(f"inserted {size} chunks in {time.perf_counter() - start:.1f} s", file=sys.stderr)
        for lo in range(0, size, batch):
            shared.add(
                ids=ids[lo : lo + batch],
                embeddings=vectors[lo : lo + batch],
                documents=texts[lo : lo + batch],
                metadatas=metadatas[lo : lo + batch],
            )
        corpora[size] = (save_id, texts, vectors, metadatas, ids)
    total_chunks = shared.count()

    rows = []
    for size in sizes:
        save_id, texts, vectors, metadatas, ids = corpora[size]
        collection = vm.collection_for(save_id)
        start = time.perf_counter()
        vm.query(save_id, questions[0], k=10)
        first_query = time.perf_counter() - start

        start = time.perf_counter()
        raw_bm25 = BM25Okapi([tokenize(t) for t in texts])
        raw_build = time.perf_counter() - start
        # Engine and raw arms alternate query by query, so background work (Chroma's own
        # persistence after the bulk insert, other processes) hits both alike.
        engine_total, engine_no_embed, embed_only, chroma, bm25 = [], [], [], [], []
        stages: dict[str, list[float]] = {}
        for question, vector in zip(questions, query_vectors):
            start = time.perf_counter()
            vm.query(save_id, question, k=10)
            elapsed = time.perf_counter() - start
            stats = vm.last_query_stats
            embed_ms = stats.timings_ms.get("embed_query", 0.0) / 1000
            engine_total.append(elapsed)
            engine_no_embed.append(elapsed - embed_ms)
            embed_only.append(embed_ms)
            for stage, ms in stats.timings_ms.items():
                stages.setdefault(stage, []).append(ms)
            start = time.perf_counter()
            collection.query(query_embeddings=[vector], n_results=50, include=["distances"])
            chroma.append(time.perf_counter() - start)
            start = time.perf_counter()
            raw_bm25.get_scores(tokenize(question))
            bm25.append(time.perf_counter() - start)
        raw_sum = [a + b for a, b in zip(chroma, bm25)]

        layout = {}
        layout["shared collection, where save"] = timed(
            lambda v: shared.query(
                query_embeddings=[v], n_results=50, where={"save_id": save_id}, include=["distances"]
            ),
            [(v,) for v in query_vectors],
        )
        max_turn = metadatas[-1]["turn_id"]
        layout["own collection, where turn+type"] = timed(
            lambda v: collection.query(
                query_embeddings=[v],
                n_results=50,
                include=["distances"],
                where={"$and": [{"turn_id": {"$lte": max_turn}}, {"chunk_type": {"$ne": "lore"}}]},
            ),
            [(v,) for v in query_vectors],
        )
        if size <= 10000:
            shared_recall, own_recall = [], []
            for v in query_vectors[:20]:
                truth = {ids[i] for i in np.argsort(-(vectors @ v))[:10].tolist()}
                got_shared = set(shared.query(query_embeddings=[v], n_results=10, where={"save_id": save_id})["ids"][0])
                got_own = set(collection.query(query_embeddings=[v], n_results=10)["ids"][0])
                shared_recall.append(len(got_shared & truth) / 10)
                own_recall.append(len(got_own & truth) / 10)
            layout["shared recall"] = shared_recall
            layout["own recall"] = own_recall
        rows.append(
            (size, first_query, engine_total, engine_no_embed, embed_only, chroma, bm25, raw_sum, raw_build, layout)
        )
        print(
            f"{size}: engine stage medians (ms): "
            + ", ".join(f"{k} {sorted(v)[len(v) // 2]:.2f}" for k, v in stages.items()),
            file=sys.stderr,
        )

    print(
        f"\nOne collection per save; the shared probe collection holds {total_chunks} chunks; "
        f"{len(questions)} queries per save; k=10."
    )
    print("Vectors: real MiniLM (texts cycled) for saves <= 10k chunks, noisy copies of them above (synthetic).\n")
    print(
        "| save size | engine p50 / p95 (ms) | engine w/o query embedding p50 / p95 | raw Chroma (own collection) p50 "
        "| raw BM25Okapi get_scores p50 | raw sum p50 / p95 | ratio p50 / p95 | query embedding p50 "
        "| first query (builds indexes) |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for size, first_query, total, no_embed, embed_only, chroma, bm25, raw_sum, _raw_build, _layout in rows:
        t, n, c, b, r, e = (summarize_ms(x) for x in (total, no_embed, chroma, bm25, raw_sum, embed_only))
        print(
            f"| {size:,} | {t['p50']:.1f} / {t['p95']:.1f} | {n['p50']:.1f} / {n['p95']:.1f} | {c['p50']:.1f} | {b['p50']:.1f} | "
            f"{r['p50']:.1f} / {r['p95']:.1f} | {n['p50'] / r['p50']:.2f}x / {n['p95'] / r['p95']:.2f}x | {e['p50']:.1f} | {first_query * 1000:.0f} ms |"
        )
    print("\nLayout probe (Chroma query, 50 results, p50):")
    print(
        "| save size | shared collection, where save | own collection, no where (engine) | own collection, where turn+type (matches all) | recall@10 vs exact: shared / own |"
    )
    print("|---|---|---|---|---|")
    for size, _f, _t, _n, _e, chroma, _b, _r, _rb, layout in rows:
        recall = (
            f"{np.mean(layout['shared recall']):.3f} / {np.mean(layout['own recall']):.3f}"
            if "own recall" in layout
            else "-"
        )
        print(
            f"| {size:,} | {summarize_ms(layout['shared collection, where save'])['p50']:.2f} ms | "
            f"{summarize_ms(chroma)['p50']:.2f} ms | "
            f"{summarize_ms(layout['own collection, where turn+type'])['p50']:.2f} ms | {recall} |"
        )
    vm.store.client.delete_collection("layout-probe-shared")
    vm.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())

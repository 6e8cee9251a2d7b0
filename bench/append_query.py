"""The first query after a write, and the hybrid query against the raw libraries, in one run.

Part 1, first query after an append (saves of 10k and 100k chunks, --sizes): each round
appends one turn (--append chunks, written to the save's collection with ready vectors,
then `note_external_write`, as a turn's embedding job ends) and times the next
`query(save_id, question, k=10)` -- which reloads the corpus (a page of ids plus the new
chunks) and brings its BM25 view up to date. Three ways, alternating round by round on the
same save:
- engine: the cached view is extended (`views.extend_view`);
- cold: the same numpy build from scratch (the carried views are dropped);
- previous engine: the build this branch replaced (rank_bm25-constructed `PostingsBM25`
  plus two `AggregatedBM25` over same-turn groups), as the engine did before: the 2.4 s /
  ~25 s of issue 14.
Ratios are against the previous engine's median in the same run.

Part 2, hybrid query at --hybrid-size chunks (10k), query embedding included, each query
text new to the query LRU (the cache is off): the engine (ONNX Runtime) against the raw sum
of a torch `model.encode` of the query, a bare Chroma query (50 results) and a bare
`BM25Okapi.get_scores`, and against the engine with torch as runtime (today's path with the
new runtime off), query by query in turn.

Vectors: real MiniLM vectors of LoCoMo utterances (cycled), noised and re-normalised above
10k (synthetic; latency only). Chunks per turn: --per-turn (40, as bench/query_latency.py).

`--views-only` measures just the view stage in process, without Chroma or the corpus
reload (whose times under load are dominated by the store): per size, a corpus of the
LoCoMo texts' real index terms, then alternately the previous engine's build, the numpy
cold build and `extend_view` after appending one chunk as a new turn (--rounds each).

    .venv/bin/python bench/append_query.py [--sizes 10000,100000] [--rounds 3] [--append 1]
    .venv/bin/python bench/append_query.py --views-only [--sizes 10000,100000] [--rounds 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import uuid
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import DEFAULT_LOCOMO, setup_django, summarize_ms  # noqa: E402
from query_latency import locomo_texts_and_questions  # noqa: E402


def previous_build_view(corpus, positions, config):
    """The view build this branch replaced (same-turn groups; rank_bm25-constructed own index)."""
    from studio.memory.retrieval import lexical, views

    positions = np.asarray(positions, dtype=np.int64)
    own_docs = [corpus.terms[p] for p in positions]
    count = len(positions)
    turns, types = corpus.turn_ids[positions], corpus.chunk_types[positions]
    is_lore = types == "lore"
    starts_group = np.ones(count, dtype=bool)
    starts_group[1:] = (turns[1:] != turns[:-1]) | (types[1:] != types[:-1]) | is_lore[1:] | is_lore[:-1]
    group_of = np.cumsum(starts_group) - 1
    group_starts = np.flatnonzero(starts_group)
    group_ends = np.append(group_starts[1:], count)
    window, index = config.context_window, np.arange(count)
    low = np.maximum(group_starts[group_of], index - window)
    high = np.minimum(group_ends[group_of], index + window + 1)
    fanout = high - low
    indptr = np.concatenate([[0], np.cumsum(fanout)]).astype(np.int64)
    targets = (np.repeat(low, fanout) + (np.arange(fanout.sum()) - np.repeat(indptr[:-1], fanout))).astype(np.int64)
    own = lexical.PostingsBM25(own_docs, k1=config.bm25_k1, b=config.bm25_b)
    context = lexical.AggregatedBM25(own, indptr, targets, count, k1=config.bm25_k1, b=config.bm25_b)
    turn = lexical.AggregatedBM25(
        own,
        np.arange(count + 1, dtype=np.int64),
        group_of.astype(np.int64),
        len(group_starts),
        k1=config.bm25_k1,
        b=config.bm25_b,
    )
    structure = views.build_structure(corpus, positions, config)
    member = np.zeros(len(corpus.ids), dtype=bool)
    member[positions] = True
    return views.View(positions, own, context, turn, structure.group_of, member, structure)


def views_only(args, texts) -> None:
    """The view stage alone: previous build, numpy cold build and extend, alternating."""
    from studio.memory.retrieval import views
    from studio.memory.retrieval.config import RetrievalConfig
    from studio.memory.retrieval.corpus import Corpus, index_terms, term_vector

    config = RetrievalConfig()

    def corpus_of(n, per_turn):
        vocab: dict[str, int] = {}
        terms = [index_terms(texts[i % len(texts)], config) for i in range(n)]
        vectors = [term_vector(t, vocab) for t in terms]
        metadatas = [
            {"turn_id": 1 + i // per_turn if i < n - 1 else 10**9, "chunk_type": "narrative"} for i in range(n)
        ]
        return Corpus(
            version=1,
            ids=[str(i) for i in range(n)],
            texts=[""] * n,
            metadatas=metadatas,
            turn_ids=np.asarray([m["turn_id"] for m in metadatas]),
            chunk_types=np.asarray(["narrative"] * n, dtype=object),
            position={str(i): i for i in range(n)},
            terms=terms,
            vocab=vocab,
            term_ids=[a for a, _ in vectors],
            term_counts=[b for _, b in vectors],
            doc_lens=np.asarray([len(t) for t in terms], dtype=np.int64),
        )

    print(
        f"\nView stage alone, in process: first query's view after appending one chunk as a new turn, "
        f"{args.rounds} rounds alternating, median ms (load {os.getloadavg()[0]:.1f} at start)."
    )
    print(
        "| save size | chunks per turn | previous engine (cold) | numpy cold build | extend_view | extend / previous | cold / previous |"
    )
    print("|---|---|---|---|---|---|---|")
    for size in [int(s) for s in args.sizes.split(",") if s]:
        for per_turn in (args.per_turn, 1):
            after = corpus_of(size + 1, per_turn)
            before_positions = np.arange(size)
            base = views.build_view(after, before_positions, config)  # the view of the corpus before the append
            samples = {"previous": [], "cold": [], "extend": []}
            for _round in range(args.rounds):
                for name, run in (
                    ("previous", lambda: previous_build_view(after, np.arange(size + 1), config)),
                    ("cold", lambda: views.build_view(after, np.arange(size + 1), config)),
                    ("extend", lambda: views.extend_view(base, after, np.arange(size + 1), config)),
                ):
                    begin = time.perf_counter()
                    run()
                    samples[name].append((time.perf_counter() - begin) * 1000)
            p, c, e = (statistics.median(samples[k]) for k in ("previous", "cold", "extend"))
            print(f"| {size:,} | {per_turn} | {p:.0f} | {c:.0f} | {e:.1f} | {e / p:.4f}x | {c / p:.2f}x |")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", default=str(DEFAULT_LOCOMO))
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--append", type=int, default=1, help="chunks appended per round (one turn)")
    parser.add_argument("--per-turn", type=int, default=40)
    parser.add_argument("--hybrid-size", type=int, default=10000)
    parser.add_argument("--queries", type=int, default=60)
    parser.add_argument("--views-only", action="store_true", help="only the view stage, in process")
    args = parser.parse_args()

    setup_django()
    if args.views_only:
        views_only(args, locomo_texts_and_questions(Path(args.data))[0])
        return 0
    from django.conf import settings
    from rank_bm25 import BM25Okapi

    from studio.memory.embeddings import embedding
    from studio.memory.retrieval import corpus as corpus_module
    from studio.memory.retrieval.lexical import tokenize
    from studio.memory.vector import VectorMemory

    embedding.query_cache_clear(maxsize=0)  # every query pays its embedding
    onnx = embedding.load_embedder("onnx")
    torch = embedding.load_embedder("torch")
    vm = VectorMemory(settings.CHROMA_PATH, embedder=onnx)
    base_texts, questions = locomo_texts_and_questions(Path(args.data))
    real_vectors = onnx.encode(base_texts, batch_size=32)
    rng = np.random.default_rng(0)
    batch = int(vm.store.client.get_max_batch_size())
    next_turn: dict[str, int] = {}

    def write(save_id, start, count, turn_of):
        texts = [base_texts[(start + i) % len(base_texts)] for i in range(count)]
        vectors = real_vectors[(start + np.arange(count)) % len(real_vectors)]
        if start + count > 10000:
            vectors = vectors + rng.normal(0, 0.05, vectors.shape).astype(np.float32)
            vectors = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
        metadatas = [
            {
                "save_id": save_id,
                "turn_id": turn_of(i),
                "chunk_type": "narrative",
                "chunk_seq": start + i,
                "chunk_part": 0,
                "chunk_parts": 1,
            }
            for i in range(count)
        ]
        ids = [uuid.uuid4().hex for _ in range(count)]
        collection = vm.collection_for(save_id)
        for lo in range(0, count, batch):
            collection.add(
                ids=ids[lo : lo + batch],
                embeddings=vectors[lo : lo + batch],
                documents=texts[lo : lo + batch],
                metadatas=metadatas[lo : lo + batch],
            )
        vm.note_external_write(save_id)

    real_carried, real_build = corpus_module.carried_views, corpus_module.build_view
    # In this order, so that the engine's round extends the numpy view the cold round built.
    ways = {
        "previous engine (cold)": (lambda cached: {}, previous_build_view),
        "cold (numpy build)": (lambda cached: {}, real_build),
        "engine (extend)": (real_carried, real_build),
    }
    part1 = []
    for size in [int(s) for s in args.sizes.split(",") if s]:
        save_id = f"append-{size}"
        vm.delete_save(save_id)
        start = time.perf_counter()
        write(save_id, 0, size, lambda i: 1 + i // args.per_turn)
        print(f"inserted {size} chunks in {time.perf_counter() - start:.1f} s", file=sys.stderr)
        written = size
        next_turn[save_id] = 2 + (size - 1) // args.per_turn
        samples: dict[str, list[tuple[float, float, float]]] = {way: [] for way in ways}
        vm.query(save_id, questions[0], k=10)  # the first view, built once
        for round_index in range(args.rounds):
            for way, (carried, build) in ways.items():
                corpus_module.carried_views, corpus_module.build_view = carried, build
                try:
                    turn = next_turn[save_id]
                    write(save_id, written, args.append, lambda i, t=turn: t)
                    written += args.append
                    next_turn[save_id] += 1
                    question = questions[(round_index * 7 + len(samples[way])) % len(questions)]
                    begin = time.perf_counter()
                    vm.query(save_id, question, k=10)
                    elapsed = time.perf_counter() - begin
                    stats = vm.last_query_stats.timings_ms
                    samples[way].append((elapsed * 1000, stats.get("corpus", 0.0), stats.get("index", 0.0)))
                finally:
                    corpus_module.carried_views, corpus_module.build_view = real_carried, real_build
                print(f"{size} round {round_index} {way}: {samples[way][-1]}", file=sys.stderr)
        part1.append((size, samples))
        if size != args.hybrid_size:
            vm.delete_save(save_id)

    # Part 2: the hybrid query at --hybrid-size chunks against the raw libraries.
    save_id = f"append-{args.hybrid_size}"
    if vm.count(save_id) == 0:
        write(save_id, 0, args.hybrid_size, lambda i: 1 + i // args.per_turn)
    corpus = vm.get_chunks(save_id)
    raw_bm25 = BM25Okapi([tokenize(row["text"]) for row in corpus])
    collection = vm.collection_for(save_id)
    torch_vm = VectorMemory(None, client=vm._client, versions=vm._versions, embedder=torch)
    vm.query(save_id, "warm up", k=10)
    torch_vm.query(save_id, "warm up", k=10)
    engine, today, raw, raw_parts = [], [], [], {"torch encode": [], "chroma": [], "bm25": []}
    for number, question in enumerate(questions[: args.queries]):
        text = f"{question} ({number})"  # never a repeat, whatever caches exist
        begin = time.perf_counter()
        vm.query(save_id, text, k=10)
        engine.append(time.perf_counter() - begin)  # seconds: summarize_ms reports ms
        begin = time.perf_counter()
        vector = torch.encode([text + " raw"])[0]
        encoded = time.perf_counter()
        collection.query(query_embeddings=[vector], n_results=50, include=["distances"])
        queried = time.perf_counter()
        raw_bm25.get_scores(tokenize(text))
        done = time.perf_counter()
        raw.append(done - begin)
        raw_parts["torch encode"].append(encoded - begin)
        raw_parts["chroma"].append(queried - encoded)
        raw_parts["bm25"].append(done - queried)
        begin = time.perf_counter()
        torch_vm.query(save_id, text + " today", k=10)
        today.append(time.perf_counter() - begin)

    print(
        f"\nPart 1: first query after appending {args.append} chunk(s) as a new turn "
        f"({args.per_turn} chunks per turn before), {args.rounds} rounds per way, medians (ms)."
    )
    print("| save size | way | first query | corpus reload | view (BM25 indexes) | ratio to previous engine |")
    print("|---|---|---|---|---|---|")
    for size, samples in part1:
        previous = statistics.median(s[0] for s in samples["previous engine (cold)"])
        for way, rows in samples.items():
            total = statistics.median(s[0] for s in rows)
            print(
                f"| {size:,} | {way} | {total:.0f} | {statistics.median(s[1] for s in rows):.0f} | "
                f"{statistics.median(s[2] for s in rows):.0f} | {total / previous:.3f}x |"
            )
    e, t, r = summarize_ms(engine), summarize_ms(today), summarize_ms(raw)
    parts = ", ".join(f"{name} {summarize_ms(values)['p50']:.1f}" for name, values in raw_parts.items())
    print(
        f"\nPart 2: hybrid query(k=10) at {args.hybrid_size:,} chunks, {len(engine)} queries, query embedding included."
    )
    print("| path | p50 (ms) | p95 (ms) | p50 ratio to raw sum |")
    print("|---|---|---|---|")
    print(f"| engine (ONNX Runtime, extendable views) | {e['p50']:.1f} | {e['p95']:.1f} | {e['p50'] / r['p50']:.2f}x |")
    print(
        f"| engine with torch as runtime (the new runtime off) | {t['p50']:.1f} | {t['p95']:.1f} | {t['p50'] / r['p50']:.2f}x |"
    )
    print(
        f"| raw sum: torch encode + bare Chroma + bare BM25Okapi ({parts}) | {r['p50']:.1f} | {r['p95']:.1f} | 1.00x |"
    )
    print(f"\nengine vs the torch path: {t['p50'] / e['p50']:.2f}x faster at p50")
    vm.delete_save(save_id)
    vm.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())

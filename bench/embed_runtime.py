"""Embedding runtimes: torch vs ONNX Runtime on the packaged MiniLM, measured alternately.

One process loads both runtimes (`embedding.load_embedder("torch")` / `("onnx")`, the same
objects `AXIOM_EMBEDDING_RUNTIME` selects) and, for the thread-count choice, a second ONNX
session with 2 intra-op threads. Every measurement alternates the runtimes sample by
sample (or round by round), so background load from the other processes on the machine
hits them alike; the ratios compare runtimes within this run. Beside wall-clock time each
figure has its CPU time (`time.process_time`, the whole process): on a machine shared with
other processes the wall time includes waiting for a core, the CPU time does not, so the
CPU ratios are the steadier comparison (both runtimes run one thread by default).

1. Equality: the max absolute difference of the ONNX vectors from torch's on the bench's
   texts (queries, long texts, bulk texts).
2. Single short query: `encode([q], batch_size=1)` (raw, no query cache), p50 / p95 over
   --queries LoCoMo questions, torch / ONNX / ONNX 2 threads in turn for each question.
3. Long texts, batch 16: --rounds rounds of 16 texts of > 256 word pieces (truncated to the
   window) per runtime; texts/s, median round.
4. Bulk through the engine: `VectorMemory.embed_chunks` (the public bulk path: splitting
   check, encode, Chroma upsert, version bump) of --bulk-n turns on the default embedder
   (what `get_embedder()` picks, i.e. AXIOM_EMBEDDING_RUNTIME, default auto), alternating
   with a raw encode of the same texts at the same batch size on each runtime; the engine
   is compared with the faster runtime's raw throughput (target >= 0.9x).
5. Query cache: each question asked twice through `embedding.embed_query` (the context
   viewer and then the narrator), the hit/miss counts and the miss / hit cost.

Texts: LoCoMo utterances (from --data) joined three by three for the bulk (inside the
window, so raw and engine encode the very same texts), ten joined for the long texts.

    .venv/bin/python bench/embed_runtime.py [--queries 200] [--rounds 6] [--bulk-n 600]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import DEFAULT_LOCOMO, setup_django, summarize_ms  # noqa: E402
from query_latency import locomo_texts_and_questions  # noqa: E402


def measure(fn) -> tuple[float, float]:
    """Run fn; return (wall seconds, CPU seconds of the whole process)."""
    wall, cpu = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - wall, time.process_time() - cpu


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", default=str(DEFAULT_LOCOMO))
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=6, help="rounds of the long-text batch and of the bulk")
    parser.add_argument("--bulk-n", type=int, default=600)
    parser.add_argument("--batch-size", type=int, default=32, help="bulk batch size (the engine's default)")
    args = parser.parse_args()

    utterances, questions = locomo_texts_and_questions(Path(args.data))
    if not questions:
        parser.error(f"no LoCoMo conversation files under {args.data} (--data)")
    load_start = os.getloadavg()
    setup_django()
    from django.conf import settings

    from studio.memory.embeddings import embedding
    from studio.memory.embeddings import embedding_onnx
    from studio.memory.vector import VectorMemory

    timings = {}
    start = time.perf_counter()
    torch_e = embedding.load_embedder("torch")
    timings["torch load"] = time.perf_counter() - start
    start = time.perf_counter()
    onnx_e = embedding.load_embedder("onnx")
    timings["onnx load (export included when not cached)"] = time.perf_counter() - start
    if torch_e is None or onnx_e is None:
        print(
            "a runtime is unavailable:",
            embedding.runtime_unavailable_reason("torch"),
            embedding.runtime_unavailable_reason("onnx"),
            file=sys.stderr,
        )
        return 1
    data, path, _ = embedding_onnx.ensure_model(
        embedding.onnx_cache_root(), embedding.model_path(), lambda: torch_e.model
    )
    start = time.perf_counter()
    embedding_onnx.OnnxEmbedder(data, embedding.model_path(), threads=1)
    timings["onnx session from a built cache"] = time.perf_counter() - start
    onnx2 = embedding_onnx.OnnxEmbedder(data, embedding.model_path(), threads=2)
    runtimes = {"torch": torch_e, "onnx": onnx_e, "onnx 2 threads": onnx2}

    queries = [questions[i % len(questions)] for i in range(args.queries)]
    long_texts = [
        " ".join(utterances[(10 * i + j) % len(utterances)] for j in range(10)) for i in range(16 * args.rounds)
    ]
    long_texts = [t if len(onnx_e.token_spans(t)) > 256 else (t + " ") * 3 for t in long_texts]
    bulk = [" ".join(utterances[(3 * i + j) % len(utterances)] for j in range(3)) for i in range(args.bulk_n)]
    fits = sum(1 for t in bulk if len(onnx_e.token_spans(t)) <= onnx_e.max_tokens)

    for embedder in runtimes.values():  # warm-up (first-call allocations, lazy imports)
        embedder.encode(queries[:4], batch_size=1)
        embedder.encode(long_texts[:16], batch_size=16)

    # 1. equality
    probe = queries[:50] + long_texts[:16] + bulk[:100] + ["", "風が強くて船は港に戻った。"]
    reference = torch_e.encode(probe, batch_size=16)
    diff = {
        name: float(np.abs(e.encode(probe, batch_size=16) - reference).max())
        for name, e in runtimes.items()
        if name != "torch"
    }

    # 2. single short query, alternating per question
    single = {name: [] for name in runtimes}
    single_cpu = {name: [] for name in runtimes}
    for query in queries:
        for name, embedder in runtimes.items():
            wall, cpu = measure(lambda: embedder.encode([query], batch_size=1))
            single[name].append(wall)
            single_cpu[name].append(cpu)

    # 3. long texts, batch 16, alternating per round
    batch = {name: [] for name in runtimes}
    batch_cpu = {name: [] for name in runtimes}
    for r in range(args.rounds):
        texts = long_texts[16 * r : 16 * (r + 1)]
        for name, embedder in runtimes.items():
            wall, cpu = measure(lambda: embedder.encode(texts, batch_size=16))
            batch[name].append(16 / wall)
            batch_cpu[name].append(16 / cpu)
        print(
            f"long batch round {r + 1}: " + ", ".join(f"{n} {v[-1]:.1f}/s" for n, v in batch.items()), file=sys.stderr
        )

    # 4. bulk through the engine's public path vs raw encodes, alternating per round
    vm = VectorMemory(settings.CHROMA_PATH)
    engine_runtime = vm._get_embedder().runtime
    turns = [{"turn_id": i + 1, "text": t} for i, t in enumerate(bulk)]
    engine_label = f"engine embed_chunks ({engine_runtime})"
    bulk_rates = {"raw torch": [], "raw onnx": [], engine_label: []}
    bulk_cpu = {label: [] for label in bulk_rates}
    for r in range(max(1, args.rounds // 2)):
        for label, embedder in (("raw torch", torch_e), ("raw onnx", onnx_e)):
            wall, cpu = measure(lambda: embedder.encode(bulk, batch_size=args.batch_size))
            bulk_rates[label].append(len(bulk) / wall)
            bulk_cpu[label].append(len(bulk) / cpu)
        ids: list[str] = []
        wall, cpu = measure(lambda: ids.extend(vm.embed_chunks(f"bulk-{r}", turns, batch_size=args.batch_size)))
        stored = sum(1 for i in ids if i)
        bulk_rates[engine_label].append(stored / wall)
        bulk_cpu[engine_label].append(stored / cpu)
        print(f"bulk round {r + 1}: " + ", ".join(f"{n} {v[-1]:.1f}/s" for n, v in bulk_rates.items()), file=sys.stderr)
    vm.close()

    # 5. query cache: each question twice
    embedding.query_cache_clear(maxsize=256)
    miss, hit = [], []
    for query in dict.fromkeys(queries[:100]):
        start = time.perf_counter()
        embedding.embed_query(onnx_e, query)
        miss.append(time.perf_counter() - start)
        start = time.perf_counter()
        embedding.embed_query(onnx_e, query)
        hit.append(time.perf_counter() - start)
    cache_stats = embedding.query_cache_stats()
    embedding.query_cache_clear()

    load_end = os.getloadavg()
    print(
        f"\nload average (1/5/15 min) at start {load_start[0]:.2f} / {load_start[1]:.2f} / {load_start[2]:.2f}, "
        f"at end {load_end[0]:.2f} / {load_end[1]:.2f} / {load_end[2]:.2f}; {os.cpu_count()} cores; "
        f"AXIOM_TORCH_THREADS={embedding.torch_threads()} (torch and the default ONNX session)."
    )
    print(f"ONNX cache: {path} ({len(data) / 1e6:.1f} MB)")
    print("start-up: " + ", ".join(f"{k} {v:.2f} s" for k, v in timings.items()))
    print("max |onnx - torch| over %d texts: " % len(probe) + ", ".join(f"{k} {v:.1e}" for k, v in diff.items()))
    print(f"\nSingle short query (`encode([q], batch_size=1)`, {len(queries)} LoCoMo questions, alternating):\n")
    print(
        "| runtime | p50 (ms) | p95 (ms) | torch / this, p50 | torch / this, p95 | CPU p50 (ms) | torch / this, CPU |"
    )
    print("|---|---|---|---|---|---|---|")
    base, base_cpu = summarize_ms(single["torch"]), summarize_ms(single_cpu["torch"])
    for name, samples in single.items():
        s, c = summarize_ms(samples), summarize_ms(single_cpu[name])
        print(
            f"| {name} | {s['p50']:.2f} | {s['p95']:.2f} | {base['p50'] / s['p50']:.2f}x | {base['p95'] / s['p95']:.2f}x | "
            f"{c['p50']:.2f} | {base_cpu['p50'] / c['p50']:.2f}x |"
        )
    print(f"\nLong texts (> 256 word pieces, truncated to 256), batch 16, {args.rounds} rounds, median round:\n")
    print("| runtime | texts/s | this / torch | texts per CPU-second | this / torch, CPU |")
    print("|---|---|---|---|---|")
    torch_rate, torch_cpu = statistics.median(batch["torch"]), statistics.median(batch_cpu["torch"])
    for name, rates in batch.items():
        rate, cpu_rate = statistics.median(rates), statistics.median(batch_cpu[name])
        print(f"| {name} | {rate:.2f} | {rate / torch_rate:.2f}x | {cpu_rate:.2f} | {cpu_rate / torch_cpu:.2f}x |")
    fastest_label = max(("raw torch", "raw onnx"), key=lambda k: statistics.median(bulk_rates[k]))
    fastest = statistics.median(bulk_rates[fastest_label])
    print(
        f"\nBulk: {len(bulk)} turns ({fits} inside the window), batch size {args.batch_size}, "
        f"{len(bulk_rates['raw torch'])} alternating rounds, median; compared with the faster raw runtime ({fastest_label}):\n"
    )
    fastest_cpu = statistics.median(bulk_cpu[fastest_label])
    paired = {
        raw: [e / f for e, f in zip(bulk_rates[engine_label], bulk_rates[raw])] for raw in ("raw torch", "raw onnx")
    }
    print("| path | texts/s | ratio to the faster raw runtime | texts per CPU-second | ratio, CPU |")
    print("|---|---|---|---|---|")
    for label, rates in bulk_rates.items():
        rate, cpu_rate = statistics.median(rates), statistics.median(bulk_cpu[label])
        print(f"| {label} | {rate:.2f} | {rate / fastest:.2f}x | {cpu_rate:.2f} | {cpu_rate / fastest_cpu:.2f}x |")
    for raw, ratios in paired.items():
        print(
            f"\nengine / {raw}, round by round (wall): "
            + ", ".join(f"{p:.2f}x" for p in ratios)
            + f"; median {statistics.median(ratios):.2f}x"
        )
    m, h = summarize_ms(miss), summarize_ms(hit)
    print(
        f"\nQuery cache (each of {len(miss)} questions asked twice through embed_query, onnx): "
        f"hits {cache_stats['hits']}, misses {cache_stats['misses']}, size {cache_stats['size']}/{cache_stats['maxsize']}; "
        f"miss p50 {m['p50']:.2f} ms, hit p50 {h['p50'] * 1000:.1f} us"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())

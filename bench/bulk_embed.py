"""Bulk embedding throughput: sync_lore of 2,000 entries and embed_chunks of 2,000 turns.

Each is compared with a bare `model.encode` of the same texts at the same batch size, in
the same run (rounds alternate raw / engine so background load hits both alike; the median
round is reported). The engine's figure includes everything it does: splitting check,
encoding, writing to Chroma, bumping the corpus version (and for sync_lore, deleting the
previous lore). Texts: LoCoMo utterances (from --data) joined three by three, all inside
the model window so the raw encode sees the very same text.

    .venv/bin/python bench/bulk_embed.py [--n 2000] [--batch-size 32] [--rounds 3]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import DEFAULT_LOCOMO, setup_django  # noqa: E402
from query_latency import locomo_texts_and_questions  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", default=str(DEFAULT_LOCOMO))
    parser.add_argument("--n", type=int, default=2000)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--single-calls", type=int, default=200, help="turns embedded one embed_chunk call each")
    args = parser.parse_args()

    setup_django()
    from django.conf import settings

    from studio.memory.embeddings.embedding import get_embedder
    from studio.memory.vector import VectorMemory

    vm = VectorMemory(settings.CHROMA_PATH)
    embedder = get_embedder()
    utterances, _ = locomo_texts_and_questions(Path(args.data))
    texts = [" ".join(utterances[(3 * i + j) % len(utterances)] for j in range(3)) for i in range(args.n)]
    fits = sum(1 for t in texts if len(embedder.token_spans(t)) <= 240)
    entries = [{"entry_id": f"e{i}", "text": t, "title": f"Entry {i}"} for i, t in enumerate(texts)]
    turns = [{"turn_id": i + 1, "text": t} for i, t in enumerate(texts)]
    embedder.encode(texts[:64], batch_size=args.batch_size)  # warm-up

    results = {"raw": [], "lore": [], "turns": []}
    for round_ in range(args.rounds):
        start = time.perf_counter()
        embedder.encode(texts, batch_size=args.batch_size)  # the raw encode of the runtime the engine uses
        results["raw"].append(args.n / (time.perf_counter() - start))
        start = time.perf_counter()
        embedded = vm.sync_lore("bulk-lore", entries)
        results["lore"].append(embedded / (time.perf_counter() - start))
        start = time.perf_counter()
        ids = vm.embed_chunks(f"bulk-turns-{round_}", turns, batch_size=args.batch_size)
        results["turns"].append(sum(1 for i in ids if i) / (time.perf_counter() - start))
        print(f"round {round_ + 1}: " + ", ".join(f"{k} {v[-1]:.1f}/s" for k, v in results.items()), file=sys.stderr)

    start = time.perf_counter()
    for turn in turns[: args.single_calls]:
        vm.embed_chunk("bulk-single", turn["turn_id"], turn["text"])
    single = args.single_calls / (time.perf_counter() - start)

    raw = statistics.median(results["raw"])
    lore = statistics.median(results["lore"])
    turns_rate = statistics.median(results["turns"])
    print(
        f"\n{args.n} texts ({fits} within the 240-piece window), batch size {args.batch_size}, "
        f"median of {args.rounds} alternating rounds; lore count after the rounds: "
        f"{len(vm.get_chunks('bulk-lore'))} (idempotent).\n"
    )
    print("| path | texts/s | ratio to raw encode |")
    print("|---|---|---|")
    print(f"| raw `model.encode` | {raw:.1f} | 1.00x |")
    print(f"| `sync_lore` ({args.n} entries) | {lore:.1f} | {lore / raw:.2f}x |")
    print(f"| `embed_chunks` ({args.n} turns) | {turns_rate:.1f} | {turns_rate / raw:.2f}x |")
    print(f"| `embed_chunk`, one call per turn ({args.single_calls}) | {single:.1f} | {single / raw:.2f}x |")
    vm.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Retrieval quality on LoCoMo: recall@1/5/10/20 and MRR, semantic / lexical / hybrid.

Mapping (../shared/data/locomo/README.md): one conversation = one save, one utterance = one
chunk. `--shape session`: one session = one turn (turn_id = N, ~20 chunks a turn, the shape
the engine was first measured in); `--shape turn`: every utterance its own turn, numbered in
order (one chunk a turn: a game save's shape). `--shape session,turn` (default) runs both
over the same embeddings. Each utterance is one chunk with text "Speaker: text" plus the image
caption when there is one, its dia_id in the chunk metadata. Chunks go in through the
public `embed_chunk(save_id, turn_id, text, metadata_extra={"dia_id": ...})`, one call per
utterance; questions (categories 1-4) go through `query(save_id, question, k=20)`.
recall@k = share of a question's evidence dia_ids among the top k, averaged over questions.

Evidence ids are read leniently ("D8:6; D9:17" is two ids, "D:11:26" is D11:26); ids not
in the conversation are dropped and questions left without evidence are skipped (the
count is printed).

Besides the engine's default ("hybrid"), the same store is searched with single arms and
with steps of the pipeline switched off, so each engine change shows what it bought; and
the raw libraries (rank_bm25 over whitespace-free `tokenize`, MiniLM cosine, plain RRF)
are measured on the same data as the reference. The data is read from --data (never copied
into the repository).

    .venv/bin/python bench/retrieval_quality.py [--data ../shared/data/locomo] [--convs 26,30] [--shape turn]
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import DEFAULT_LOCOMO, setup_django  # noqa: E402

KS = (1, 5, 10, 20)
EVIDENCE = re.compile(r"D\s*:?\s*(\d+)\s*:\s*(\d+)")


def load_conversation(path: Path, shape: str = "session"):
    data = json.loads(path.read_text(encoding="utf-8"))
    chunks = []  # (turn_id, dia_id, text)
    session = 1
    while f"session_{session}" in data:
        for utterance in data[f"session_{session}"]:
            text = f"{utterance['speaker']}: {utterance['text']}"
            if utterance.get("blip_caption"):
                text += f" [shares a photo: {utterance['blip_caption']}]"
            chunks.append((session if shape == "session" else len(chunks) + 1, utterance["dia_id"], text))
        session += 1
    known = {dia for _, dia, _ in chunks}
    questions, skipped = [], 0
    for qa in data["qa"]:
        if qa.get("category") not in (1, 2, 3, 4):
            continue
        evidence = [f"D{a}:{b}" for item in qa.get("evidence", []) for a, b in EVIDENCE.findall(str(item))]
        evidence = sorted({e for e in evidence if e in known})
        if not evidence:
            skipped += 1
            continue
        questions.append((qa["question"], evidence))
    return chunks, questions, skipped


class Scores:
    def __init__(self):
        self.recall = {k: 0.0 for k in KS}
        self.mrr = 0.0
        self.n = 0

    def add(self, ranked: list[str], evidence: list[str]):
        wanted = set(evidence)
        for k in KS:
            self.recall[k] += len(wanted & set(ranked[:k])) / len(wanted)
        for rank, dia in enumerate(ranked, start=1):
            if dia in wanted:
                self.mrr += 1 / rank
                break
        self.n += 1

    def row(self, name: str) -> str:
        cells = " | ".join(f"{self.recall[k] / self.n:.3f}" for k in KS)
        return f"| {name} | {cells} | {self.mrr / self.n:.3f} |"


def raw_baselines(conversations, embedder):
    """The raw libraries on the same data: BM25Okapi(tokenize), MiniLM cosine, plain RRF."""
    import numpy as np
    from rank_bm25 import BM25Okapi

    from studio.memory.retrieval.fusion import reciprocal_rank_fusion
    from studio.memory.retrieval.lexical import tokenize

    bm25_scores, semantic_scores, rrf_scores = Scores(), Scores(), Scores()
    for chunks, questions in conversations:
        dias = [dia for _, dia, _ in chunks]
        bm25 = BM25Okapi([tokenize(text) for _, _, text in chunks])
        vectors = embedder.encode([text for _, _, text in chunks], batch_size=32)
        query_vectors = embedder.encode([q for q, _ in questions], batch_size=32)
        for (question, evidence), query_vector in zip(questions, query_vectors):
            scores = bm25.get_scores(tokenize(question))
            nonzero = np.flatnonzero(scores)
            lexical = [dias[i] for i in nonzero[np.argsort(-scores[nonzero], kind="stable")]]
            semantic = [dias[i] for i in np.argsort(-(vectors @ query_vector), kind="stable")]
            fused = [d for d, _ in reciprocal_rank_fusion([semantic[:50], lexical[:50]])]
            bm25_scores.add(lexical, evidence)
            semantic_scores.add(semantic, evidence)
            rrf_scores.add(fused, evidence)
    return [
        ("raw rank_bm25 (tokenize, no stop words)", bm25_scores),
        ("raw MiniLM cosine", semantic_scores),
        ("raw plain RRF of the two (k=60, top 50 each)", rrf_scores),
    ]


def measure_shape(vm, args, shape, get_embedder, RetrievalConfig):
    """Embed the conversations in one shape, ask every question under each variant, print the table."""
    default = RetrievalConfig()
    conversations = []
    total_skipped = 0
    embed_seconds = 0.0
    embedded = 0
    for conv in args.convs.split(","):
        chunks, questions, skipped = load_conversation(Path(args.data) / f"{conv}.json", shape)
        total_skipped += skipped
        save_id = f"locomo-{conv}-{shape}"
        vm.delete_save(save_id)
        start = time.perf_counter()
        for turn_id, dia_id, text in chunks:
            vm.embed_chunk(save_id, turn_id, text, metadata_extra={"dia_id": dia_id})
        embed_seconds += time.perf_counter() - start
        embedded += len(chunks)
        conversations.append((save_id, chunks, questions))
        print(f"conversation {conv}: {len(chunks)} chunks, {len(questions)} questions", file=sys.stderr)

    variants = [
        ("semantic only (engine)", replace(default, arms=("semantic",))),
        (
            "lexical only: BM25 own text, no stop words, no folding",
            replace(default, arms=("lexical",), stop_words=False, fold_inflections=False),
        ),
        ("lexical only: + stop words", replace(default, arms=("lexical",), fold_inflections=False)),
        ("lexical only: + stop words + inflection folding", replace(default, arms=("lexical",))),
        ("lexical only: + b=0.5 (default; b=0.75 above)", replace(default, arms=("lexical",))),
        ("hybrid: semantic + lexical (b=0.75)", replace(default, arms=("semantic", "lexical"), bm25_b=0.75)),
        ("hybrid: semantic + lexical", replace(default, arms=("semantic", "lexical"))),
        ("hybrid: + neighbouring-context arm", replace(default, arms=("semantic", "lexical", "context"))),
        (
            "hybrid: + turn arm, old rule (context within its turn, every arm counted)",
            replace(default, context_scope="turn", count_evidence_once=False),
        ),
        (
            "hybrid: + turn arm, context across small turns, every arm counted",
            replace(default, count_evidence_once=False),
        ),
        ("hybrid: + turn arm (engine default: context across small turns, evidence counted once)", default),
    ]
    variants[3] = (variants[3][0], replace(variants[3][1], bm25_b=0.75))
    variants[1] = (variants[1][0], replace(variants[1][1], bm25_b=0.75))
    variants[2] = (variants[2][0], replace(variants[2][1], bm25_b=0.75))
    rows = []
    latencies = []
    for name, config in variants:
        vm.set_config(config)
        scores = Scores()
        for save_id, _chunks, questions in conversations:
            for question, evidence in questions:
                start = time.perf_counter()
                results = vm.query(save_id, question, k=20)
                latencies.append(time.perf_counter() - start)
                scores.add([r.get("dia_id") for r in results], evidence)
        rows.append((name, scores))
        print(scores.row(name), file=sys.stderr)
    if not args.no_raw and shape == args.raw_shape:  # the raw libraries ignore turns: once
        rows = [*raw_baselines([(c, q) for _, c, q in conversations], get_embedder()), *rows]

    questions = sum(len(q) for _, _, q in conversations)
    print(
        f"\nShape {shape!r}. LoCoMo conversations {args.convs}: {embedded} chunks, {questions} questions "
        f"(categories 1-4; {total_skipped} skipped without usable evidence)."
    )
    print(f"Embedding through embed_chunk, one call per utterance: {embedded / embed_seconds:.1f} chunks/s.")
    print()
    print("| configuration | R@1 | R@5 | R@10 | R@20 | MRR |")
    print("|---|---|---|---|---|---|")
    for name, scores in rows:
        print(scores.row(name))
    latencies.sort()
    print(f"\nquery(k=20) latency over these saves: p50 {latencies[len(latencies) // 2] * 1000:.1f} ms")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", default=str(DEFAULT_LOCOMO), help="folder with the LoCoMo conversation files")
    parser.add_argument("--convs", default="26,30,41,42,43", help="conversation ids (file stems)")
    parser.add_argument("--no-raw", action="store_true", help="skip the raw-library reference rows")
    parser.add_argument("--shape", default="session,turn", help="session, turn or both (session,turn)")
    args = parser.parse_args()
    shapes = [shape.strip() for shape in args.shape.split(",") if shape.strip()]
    if not shapes or set(shapes) - {"session", "turn"}:
        parser.error("--shape takes session, turn or session,turn")

    setup_django()
    from studio.memory.embeddings.embedding import get_embedder
    from studio.memory.vector import RetrievalConfig, VectorMemory
    from django.conf import settings

    vm = VectorMemory(settings.CHROMA_PATH)
    args.raw_shape = shapes[0]
    for shape in shapes:
        measure_shape(vm, args, shape, get_embedder, RetrievalConfig)
    vm.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Retrieval quality on the demo save: recall@1/5/10/20 and MRR on game-shaped questions.

The demo universe and its 48-turn save (studio/universes/demo/, one narrative chunk per
turn) are loaded into a throw-away var dir (SQLite + embedded Chroma, bench/_common.py)
with the demo loader (`demo_read` / `demo_load` / `demo_embed`, what `manage.py load_demo`
runs). Each question of bench/data/demo_questions.json goes through the studio's public
search, `memory_search(game_save=..., query_text=..., k=20, exclude_chunk_type="lore")`, at
the save's current turn as horizon, with no reranker (AXIOM_RERANKER_MODEL is cleared).

Scoring: a question's answer_turns are every turn holding evidence it needs. A turn is
found at rank r when its first narrative chunk in the results is the r-th distinct turn.
recall@k = share of the answer turns among the top k turns; MRR = 1 / rank of the first
answer turn found in the top 20 (0 when none is). Both are averaged over the questions,
overall, per kind and per wording (paraphrase / alias / direct; see the file's header).

`--raw` adds, measured in the same run on the same chunks, plain RRF over the raw
libraries: a bare Chroma query of the save's collection (its stored MiniLM vectors, the
query encoded by the same packaged MiniLM, lore excluded by a `where`) fused with k=60
Reciprocal Rank Fusion with rank_bm25's BM25Okapi (defaults) over the same chunks' texts
(`tokenize`: lowercased letter/digit runs, no stop words, no folding; chunks with a zero
score left out), as bench/retrieval_quality.py's raw rows do. It is cut to the same top 20.

`--old-rule` measures the engine with the arm rule before 2026-12-01 (context within the
chunk's own turn, every arm counted even when it repeats another) for comparison.
`--explain` prints, per question, the rank of each answer turn (">20" when not in the top
20) and the top five turns returned. `--json` prints one JSON object instead of tables.
Timings are printed for information only; nothing here asserts a speed.

Failure modes: a broken questions file (duplicate ids, an answer turn the save does not
have, no "written_before_tuning" header) stops the run before anything is loaded; an
embedding runtime or vector store that is unavailable stops it after the load, with the
loader's note, since there is nothing to measure.

    .venv/bin/python bench/demo_retrieval.py [--raw] [--explain] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import ROOT, setup_django  # noqa: E402

KS = (1, 5, 10, 20)
DEPTH = max(KS)
RRF_K = 60
DEFAULT_QUESTIONS = ROOT / "bench" / "data" / "demo_questions.json"
SAVE_FILE = ROOT / "studio" / "universes" / "demo" / "save.jsonl"


def read_questions(path: Path, turn_ids: set[int]) -> tuple[dict, list[dict]]:
    """Return (header, questions) from the questions file, checked against the save's turns."""
    data = json.loads(path.read_text(encoding="utf-8"))
    header, questions = data.get("header") or {}, data.get("questions") or []
    problems = []
    if header.get("written_before_tuning") is not True:
        problems.append('the header does not say "written_before_tuning": true')
    seen: set[str] = set()
    for q in questions:
        qid = q.get("id")
        if not qid or qid in seen:
            problems.append(f"missing or duplicate id {qid!r}")
        seen.add(qid)
        turns = q.get("answer_turns") or []
        if not turns or any(t not in turn_ids for t in turns):
            problems.append(f"{qid}: answer_turns {turns} are empty or not turns of the save")
        if not str(q.get("question") or "").strip() or not q.get("kind") or not q.get("wording"):
            problems.append(f"{qid}: question, kind and wording are required")
    if problems:
        raise SystemExit(f"{path}: " + "; ".join(problems))
    return header, questions


def save_turn_ids() -> set[int]:
    return {json.loads(line)["turn_id"] for line in SAVE_FILE.read_text(encoding="utf-8").splitlines() if line.strip()}


def distinct_turns(turn_ids: list[int]) -> list[int]:
    """Best-first turns, each at the rank of its first chunk."""
    seen: set[int] = set()
    ranked = []
    for turn in turn_ids:
        if turn not in seen:
            seen.add(turn)
            ranked.append(turn)
    return ranked


def score(ranked_turns: list[int], answer_turns: list[int]) -> dict:
    """Recall at each k, reciprocal rank of the first answer turn, and each answer turn's rank."""
    top = ranked_turns[:DEPTH]
    ranks = {turn: (top.index(turn) + 1 if turn in top else None) for turn in answer_turns}
    found = [rank for rank in ranks.values() if rank is not None]
    return {
        "recall": {k: sum(1 for r in found if r <= k) / len(answer_turns) for k in KS},
        "rr": 1 / min(found) if found else 0.0,
        "ranks": ranks,
        "top5": top[:5],
    }


def aggregate(rows: list[dict]) -> dict:
    n = len(rows)
    return {
        "n": n,
        **{f"R@{k}": sum(r["recall"][k] for r in rows) / n for k in KS},
        "MRR": sum(r["rr"] for r in rows) / n,
    }


def groups(questions: list[dict], scored: list[dict]) -> dict[str, dict]:
    """Aggregates overall, per kind and per wording, in a stable order."""
    out = {"overall": aggregate(scored)}
    for field in ("kind", "wording"):
        for value in sorted({q[field] for q in questions}):
            out[f"{field}={value}"] = aggregate([s for q, s in zip(questions, scored) if q[field] == value])
    return out


class RawRRF:
    """Plain RRF of a bare Chroma query and rank_bm25 over the save's narrative chunks."""

    def __init__(self, collection, embedder):
        from rank_bm25 import BM25Okapi

        from studio.memory.retrieval.lexical import tokenize

        self.collection, self.embedder, self.tokenize = collection, embedder, tokenize
        self.where = {"chunk_type": {"$ne": "lore"}}
        got = collection.get(where=self.where, include=["documents", "metadatas"])
        self.ids = list(got["ids"])
        self.turn_of = {cid: int(meta["turn_id"]) for cid, meta in zip(got["ids"], got["metadatas"])}
        self.bm25 = BM25Okapi([tokenize(text) for text in got["documents"]])

    def ranked_turns(self, question: str) -> list[int]:
        import numpy as np

        vector = self.embedder.encode([question], batch_size=1)[0]
        response = self.collection.query(
            query_embeddings=[np.asarray(vector, dtype=np.float32)],
            n_results=len(self.ids),
            where=self.where,
            include=["distances"],
        )
        semantic = list(response["ids"][0])
        scores = self.bm25.get_scores(self.tokenize(question))
        nonzero = np.flatnonzero(scores)
        lexical = [self.ids[i] for i in nonzero[np.argsort(-scores[nonzero], kind="stable")]]
        fused: dict[str, float] = {}
        for ranked in (semantic, lexical):
            for rank, chunk_id in enumerate(ranked, start=1):
                # Insertion order breaks ties: semantic first, then lexical, best first.
                fused[chunk_id] = fused.get(chunk_id, 0.0) + 1 / (RRF_K + rank)
        order = sorted(fused, key=lambda cid: -fused[cid])  # sorted() is stable
        return distinct_turns([self.turn_of[cid] for cid in order])


def load_demo():
    """Load the demo universe and save and embed them; return the Save."""
    from studio.universes.demo.loader import demo_embed, demo_load, demo_read

    started = time.perf_counter()
    loaded = demo_load(data=demo_read())
    embedded = demo_embed(game_save=loaded.game_save, universe=loaded.universe, force=True)
    for note in embedded.notes:
        print(note, file=sys.stderr)
    if not embedded.ok or not embedded.narrative_chunks:
        raise SystemExit("The demo save could not be embedded; nothing to measure.")
    print(f"demo loaded and embedded in {time.perf_counter() - started:.1f} s", file=sys.stderr)
    return loaded.game_save


def table(results: dict[str, dict[str, dict]]) -> str:
    lines = ["| group | n | search | R@1 | R@5 | R@10 | R@20 | MRR |", "|---|---|---|---|---|---|---|---|"]
    for group in results["engine"]:
        for system, by_group in results.items():
            row = by_group[group]
            cells = " | ".join(f"{row[f'R@{k}']:.3f}" for k in KS)
            lines.append(f"| {group} | {row['n']} | {system} | {cells} | {row['MRR']:.3f} |")
    return "\n".join(lines)


def explain_line(question: dict, per_system: dict[str, dict]) -> str:
    parts = [f"{question['id']} [{question['kind']}/{question['wording']}] {question['question']}"]
    for system, scored in per_system.items():
        ranks = ", ".join(f"t{turn}:{rank if rank else '>20'}" for turn, rank in scored["ranks"].items())
        parts.append(f"    {system:6} answer ranks {ranks}; top5 {scored['top5']}; RR {scored['rr']:.3f}")
    return "\n".join(parts)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--questions", default=str(DEFAULT_QUESTIONS), help="JSON file with header and questions")
    parser.add_argument("--raw", action="store_true", help="also measure plain RRF over bare Chroma + rank_bm25")
    parser.add_argument("--explain", action="store_true", help="print the answer turns' ranks per question")
    parser.add_argument("--json", action="store_true", help="print one JSON object (machine output)")
    parser.add_argument(
        "--old-rule",
        action="store_true",
        help="the arm rule before 2026-12-01: context within its turn, every arm counted",
    )
    args = parser.parse_args()

    header, questions = read_questions(Path(args.questions), save_turn_ids())
    os.environ["AXIOM_RERANKER_MODEL"] = ""  # measure the engine without a reranker
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    workdir = setup_django()
    game_save = load_demo()

    from studio.memory.embeddings.embedding import get_embedder
    from studio.memory.recall.search import memory_search
    from studio.memory.vector import get_vector_memory

    store = get_vector_memory()
    if args.old_rule:
        from dataclasses import replace

        store.set_config(replace(store.config, context_scope="turn", count_evidence_once=False))
    systems: dict[str, list[dict]] = {"engine": []}
    timings: dict[str, list[float]] = {"engine": []}
    raw = None
    if args.raw:
        raw = RawRRF(store.collection_for(game_save.save_id, create=False), get_embedder())
        systems["raw"], timings["raw"] = [], []
    reranked = False
    searched = {"engine": set(), "raw": {len(raw.ids)} if raw is not None else set()}
    for question in questions:
        started = time.perf_counter()
        search = memory_search(game_save=game_save, query_text=question["question"], k=DEPTH, exclude_chunk_type="lore")
        timings["engine"].append(time.perf_counter() - started)
        reranked = reranked or search.stats.reranked
        searched["engine"].add(search.stats.filtered_size)
        ranked = distinct_turns([int(r["turn_id"]) for r in search.results])
        systems["engine"].append(score(ranked, question["answer_turns"]))
        if raw is not None:
            started = time.perf_counter()
            ranked = raw.ranked_turns(question["question"])
            timings["raw"].append(time.perf_counter() - started)
            systems["raw"].append(score(ranked, question["answer_turns"]))

    results = {system: groups(questions, scored) for system, scored in systems.items()}
    load = os.getloadavg()
    questions_path = Path(args.questions).resolve()
    if questions_path.is_relative_to(ROOT):
        questions_path = questions_path.relative_to(ROOT)
    summary = {
        "questions_file": str(questions_path),
        "questions_written": {k: header.get(k) for k in ("written_by", "date", "written_before_tuning")},
        "save_id": game_save.save_id,
        "horizon": game_save.current_turn,
        "reranked": reranked,
        # Chunks each side ranked per question (both: the save's narrative chunks up to the horizon).
        "chunks_searched": {s: sorted(n) for s, n in searched.items() if n},
        "load_average": [round(x, 2) for x in load],
        "query_ms_p50": {s: round(statistics.median(t) * 1000, 1) for s, t in timings.items()},
        "results": results,
    }
    if args.json:
        summary["per_question"] = [
            {
                "id": q["id"],
                "kind": q["kind"],
                "wording": q["wording"],
                **{
                    s: {
                        "ranks": {str(t): r for t, r in systems[s][i]["ranks"].items()},
                        "rr": systems[s][i]["rr"],
                        "top5": systems[s][i]["top5"],
                    }
                    for s in systems
                },
            }
            for i, q in enumerate(questions)
        ]
        print(json.dumps(summary, indent=1))
    else:
        if args.explain:
            for i, question in enumerate(questions):
                print(explain_line(question, {s: systems[s][i] for s in systems}))
            print()
        chunks = ", ".join(f"{s} {'/'.join(map(str, n))}" for s, n in summary["chunks_searched"].items())
        print(
            f"Demo save {game_save.save_id}, horizon turn {game_save.current_turn}, {len(questions)} questions "
            f"({summary['questions_file']}); chunks searched: {chunks}; reranker: {'yes' if reranked else 'none'}."
        )
        print(
            "engine = memory_search (k=20, lore excluded)"
            + (
                "; raw = plain RRF k=60 of a bare Chroma query + rank_bm25 BM25Okapi over the same chunks"
                if raw
                else ""
            )
            + "."
        )
        print()
        print(table(results))
        print()
        print(
            "query p50: "
            + ", ".join(f"{s} {v} ms" for s, v in summary["query_ms_p50"].items())
            + f"; load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}"
        )
    store.close()
    shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

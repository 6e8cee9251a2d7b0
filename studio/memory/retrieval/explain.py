"""What a search tells its caller: stage timings, the per-hit explain record, "why not this chunk?".

Every result row carries an `explain` dict with exactly the keys of `EXPLAIN_KEYS`, in that
order, whatever ran: an arm that did not rank the chunk (or did not run) gives None for its
rank and score; a row added by link expansion has no ranks, rrf_score 0.0 and
`expanded_from` set. `QueryStats` is the record of one search: stage timings in
milliseconds under the keys corpus, index, embed_query, semantic, lexical, fusion, focus,
rerank, expand and total (a stage that did not run has no key; `lexical` sums the BM25
arms), the corpus and filtered sizes, each arm's ranking size, which arms did not run and
why (`skipped_arms`), the time the query names with the turns preferred (`named_time`), and
the degradations (no semantic arm, no lexical arm, the store unreachable). docs/retrieval.md ("Result rows") documents each field for callers.

`why_not` ranks one chunk exactly over the whole filtered corpus in every arm (not cut at
the arm depth a search uses), then runs the search itself to give its fused rank, fused
(RRF) score and final rank; a chunk outside the results gets the fused rank and score the
fusion gives it over the arms cut at their depth (none when no arm reaches it); a chunk the filters exclude is reported with the reason and no ranks. It reads
every scope collection of the store when the chunk is not in the asked scope: a diagnostic
path, never the hot one.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from studio.memory.retrieval import fusion
from studio.memory.retrieval.chunks import result_row

if TYPE_CHECKING:  # pragma: no cover
    from studio.memory.retrieval.corpus import SearchFilter
    from studio.memory.retrieval.hybrid import HybridSearch

EXPLAIN_KEYS = (
    "semantic_rank",
    "semantic_distance",
    "lexical_rank",
    "bm25_score",
    "context_rank",
    "context_bm25_score",
    "turn_rank",
    "temporal_rank",
    "rrf_score",
    "fused_rank",
    "focus_boost",
    "rerank_score",
    "final_rank",
    "expanded_from",
)


@dataclass
class QueryStats:
    """What one search did and how long each stage took (milliseconds)."""

    timings_ms: dict[str, float] = field(default_factory=dict)
    corpus_size: int = 0
    filtered_size: int = 0
    arm_sizes: dict[str, int] = field(default_factory=dict)
    corpus_rebuilt: bool = False
    reranked: bool = False
    semantic_available: bool = True
    lexical_available: bool = True
    # Set when the vector store failed during this query and the answer fell back to the
    # lexical arms over the last cached corpus.
    vector_store_error: str = ""
    # Arm name -> why it did not run for this query (an arm that ran is absent).
    skipped_arms: dict[str, str] = field(default_factory=dict)
    # The time the query names and the turns preferred for it ("" when it names none).
    named_time: str = ""

    def as_dict(self) -> dict[str, Any]:
        return {
            "timings_ms": dict(self.timings_ms),
            "corpus_size": self.corpus_size,
            "filtered_size": self.filtered_size,
            "arm_sizes": dict(self.arm_sizes),
            "corpus_rebuilt": self.corpus_rebuilt,
            "reranked": self.reranked,
            "semantic_available": self.semantic_available,
            "lexical_available": self.lexical_available,
            "vector_store_error": self.vector_store_error,
            "skipped_arms": dict(self.skipped_arms),
            "named_time": self.named_time,
        }


@dataclass
class QueryResult:
    results: list[dict[str, Any]]
    stats: QueryStats


class StageTimer:
    """Adds the time since the previous lap to a stage's total in `stats.timings_ms`."""

    def __init__(self, stats: QueryStats):
        self.stats = stats
        self.start = time.perf_counter()
        self.last = self.start

    def lap(self, name: str) -> None:
        now = time.perf_counter()
        self.stats.timings_ms[name] = round(self.stats.timings_ms.get(name, 0.0) + (now - self.last) * 1000, 3)
        self.last = now

    def total(self) -> None:
        self.stats.timings_ms["total"] = round((time.perf_counter() - self.start) * 1000, 3)


def hit_explain(
    chunk_id: str,
    rankings: dict[str, Any],
    ranks: dict[str, dict[str, int]],
    *,
    rrf_score: float,
    fused_rank: int,
    focus_boost: float,
    rerank_score: float | None,
    final_rank: int,
) -> dict[str, Any]:
    """Return the explain record of a ranked hit (`rankings`: arm name -> ArmRanking)."""

    def score(arm: str) -> float | None:
        ranking = rankings.get(arm)
        return None if ranking is None else ranking.scores.get(chunk_id)

    return {
        "semantic_rank": ranks.get("semantic", {}).get(chunk_id),
        "semantic_distance": score("semantic"),
        "lexical_rank": ranks.get("lexical", {}).get(chunk_id),
        "bm25_score": score("lexical"),
        "context_rank": ranks.get("context", {}).get(chunk_id),
        "context_bm25_score": score("context"),
        "turn_rank": ranks.get("turn", {}).get(chunk_id),
        "temporal_rank": ranks.get("temporal", {}).get(chunk_id),
        "rrf_score": rrf_score,
        "fused_rank": fused_rank,
        "focus_boost": focus_boost,
        "rerank_score": rerank_score,
        "final_rank": final_rank,
        "expanded_from": None,
    }


def expansion_explain(expanded_from: str) -> dict[str, Any]:
    """Return the explain record of a lore entry added by link expansion from `expanded_from`."""
    record: dict[str, Any] = dict.fromkeys(EXPLAIN_KEYS)
    record.update(rrf_score=0.0, focus_boost=0.0, expanded_from=expanded_from)
    return record


def filtered_out_reason(metadata: dict[str, Any], scope_id: str, filters: SearchFilter) -> str | None:
    """Say why a query of `scope_id` with `filters` cannot return the chunk, or None."""
    if str(metadata.get("save_id")) != str(scope_id):
        return f"belongs to save {metadata.get('save_id')!r}"
    if filters.horizon is not None and int(metadata.get("turn_id", 0)) > filters.horizon:
        return f"turn {metadata.get('turn_id')} is after the horizon (turn {filters.horizon})"
    if filters.chunk_type is not None and metadata.get("chunk_type") != filters.chunk_type:
        return f"chunk type {metadata.get('chunk_type')!r} is not {filters.chunk_type!r}"
    if filters.exclude_chunk_type is not None and metadata.get("chunk_type") == filters.exclude_chunk_type:
        return f"chunk type {filters.exclude_chunk_type!r} is excluded"
    return None


def why_not(
    search: HybridSearch,
    scope_id: str,
    query_text: str,
    chunk_id: str,
    *,
    k: int,
    filters: SearchFilter,
    focus_terms: list[str] | None,
    prefer: Any | None = None,
    **knobs: Any,
) -> dict[str, Any]:
    """Explain where one chunk ranked for a query (see VectorMemory.explain_chunk).

    `knobs` (config, reranker, embedder) are passed on to the search as they are; `prefer`
    (the turns inside the time the query names) to both the arms and the search.
    """
    config = knobs["config"]
    report: dict[str, Any] = {
        "chunk": None,
        "filtered_out": None,
        "ranks": {},
        "scores": {},
        "fused_rank": None,
        "fused_score": None,
        "final_rank": None,
        "k": k,
        "arm_depth": max(config.arm_depth, 2 * k),
        "filtered_size": 0,
    }
    found = search.store.find_chunk(str(scope_id), chunk_id)
    if not found["ids"]:
        report["filtered_out"] = "no such chunk"
        return report
    metadata = found["metadatas"][0] or {}
    report["chunk"] = result_row(chunk_id, found["documents"][0], metadata)
    report["filtered_out"] = filtered_out_reason(metadata, scope_id, filters)
    if report["filtered_out"]:
        return report
    stats = QueryStats()
    _corpus, view, rankings = search.rank(
        str(scope_id),
        query_text,
        filters,
        0,
        stats,
        StageTimer(stats),
        full=True,
        config=config,
        embedder=knobs["embedder"],
        prefer=prefer,
    )
    report["filtered_size"] = len(view.positions)
    for name, ranking in rankings.items():
        if chunk_id in ranking.scores:
            report["ranks"][name] = ranking.ids.index(chunk_id) + 1
            report["scores"][name] = ranking.scores[chunk_id]
    outcome = search.query(
        scope_id, query_text, k=max(k, 1), filters=filters, focus_terms=focus_terms, prefer=prefer, **knobs
    )
    for row in outcome.results:
        if row["id"] == chunk_id:
            report["final_rank"] = row["explain"]["final_rank"]
            report["fused_rank"] = row["explain"]["fused_rank"]
            report["fused_score"] = row["explain"]["rrf_score"]
    if report["final_rank"] is None:
        _fuse_missed(report, chunk_id, rankings, config)
    return report


def _fuse_missed(report: dict[str, Any], chunk_id: str, rankings: dict, config: Any) -> None:
    """Give a chunk outside the results its fused rank and RRF score, fused as the search fuses
    (each arm cut at the arm depth, the arms' weights); none when no arm reaches it."""
    names = list(rankings)
    fused = fusion.reciprocal_rank_fusion(
        [fusion.cap_per_source(rankings[name].ids, report["arm_depth"]) for name in names],
        k=config.rrf_k,
        weights=[config.weight(name) for name in names],
    )
    for fused_rank, (fused_id, score) in enumerate(fused, start=1):
        if fused_id == chunk_id:
            report["fused_rank"], report["fused_score"] = fused_rank, score
            return

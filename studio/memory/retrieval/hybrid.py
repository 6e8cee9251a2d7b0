"""Hybrid search of one scope: the arms, fused, focused, reranked, cut to k, lore links expanded.

`HybridSearch.query` runs the pipeline of docs/retrieval.md ("Search pipeline"):
1. the scope's cached corpus (corpus.py) and the view of the query's filter;
2. the arms (arms.py), each contributing its best `depth` = max(arm_depth, 2k) ids; the
   temporal arm too when the caller passes a `TimePreference` (the query names a time:
   temporal.py), and `stats.named_time` then says which turns it prefers;
3. Reciprocal Rank Fusion over the arms that ran (fusion.py), weighted per arm;
4. the focus boost: a chunk mentioning a focus term as a whole-word phrase gets
   `focus_boost`, which reorders close candidates and never lifts an irrelevant one over a
   clear hit;
5. the reranker, when given, over the first `rerank_pool` candidates only (the rest keep
   their order; a reranker answering None or the wrong number of scores changes nothing);
6. the top k, each with its explain record (explain.py), then optional link expansion: the
   lore entries a lore hit links to, one hop, `link_expansion_cap` in all, after the top k.

Invariants: a result passes the query's filter (scope, turn horizon, chunk type) whatever
arm found it; equal inputs give equal rankings (fusion and every sort break ties by a
stable order); the config, reranker and embedder are passed per call, so a VectorMemory's
current settings apply to every query. The calling thread's last QueryStats stays
readable (`last_stats`).

Failure modes: see corpus.py (a stale cache answers when the store is down during a
reload; nothing cached: the error propagates) and arms.py (the semantic arm degrades when
the store fails during the query). A query with k <= 0 or a blank text returns nothing
without touching the store.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from studio.memory.retrieval import arms as arm_units
from studio.memory.retrieval import fusion, lexical
from studio.memory.retrieval.chunks import LORE, result_row
from studio.memory.retrieval.config import RetrievalConfig
from studio.memory.retrieval.corpus import Corpus, CorpusCache, SearchFilter, View
from studio.memory.retrieval.explain import QueryResult, QueryStats, StageTimer, expansion_explain, hit_explain
from studio.memory.retrieval.store import ChunkStore
from studio.memory.retrieval.temporal import TimePreference


@dataclass
class Candidate:
    """A fused hit on its way to the top k."""

    chunk_id: str
    score: float
    rrf_score: float
    focus_boost: float
    fused_rank: int
    rerank_score: float | None = None


def _phrase(text: str) -> str:
    """Return `text` as space-delimited tokens, so a phrase matches on word boundaries only."""
    return " " + " ".join(lexical.tokenize(text)) + " "


class HybridSearch:
    """The search over one store's scopes, reading them through the corpus cache."""

    def __init__(self, store: ChunkStore, corpora: CorpusCache) -> None:
        self.store = store
        self.corpora = corpora
        self._local = threading.local()

    @property
    def last_stats(self) -> QueryStats | None:
        """Stats of the last search made by the calling thread."""
        return getattr(self._local, "stats", None)

    def rank(
        self,
        scope_id: str,
        query_text: str,
        filters: SearchFilter,
        depth: int,
        stats: QueryStats,
        timer: StageTimer,
        *,
        full: bool = False,
        config: RetrievalConfig,
        embedder: Callable[[], Any | None],
        prefer: TimePreference | None = None,
    ) -> tuple[Corpus, View, dict[str, arm_units.ArmRanking]]:
        """Run every enabled arm; return the corpus, the view and arm name -> ranking."""
        if prefer is not None:
            stats.named_time = prefer.note
        read = self.corpora.read(str(scope_id), config)
        corpus = read.corpus
        if read.rebuilt:
            stats.corpus_rebuilt = True
        if read.store_error:
            stats.vector_store_error = read.store_error
        timer.lap("corpus")
        view = self.corpora.view(corpus, filters, config)
        stats.corpus_size = len(corpus.ids)
        stats.filtered_size = len(view.positions)
        timer.lap("index")
        wants_embedding = "semantic" in config.arms or (prefer is not None and "temporal" in config.arms)
        arm_input = arm_units.ArmInput(
            scope_id=str(scope_id),
            query_text=query_text,
            corpus=corpus,
            view=view,
            filters=filters,
            depth=depth,
            full=full,
            config=config,
            store=self.store,
            embedder=embedder() if wants_embedding else None,
            stats=stats,
            timer=timer,
            prefer=prefer,
        )
        return corpus, view, arm_units.run_arms(arm_input, config.arms)

    def query(
        self,
        scope_id: str,
        query_text: str,
        *,
        k: int,
        filters: SearchFilter,
        focus_terms: list[str] | None = None,
        expand_links: bool = False,
        use_reranker: bool = True,
        config: RetrievalConfig,
        reranker: Any | None,
        embedder: Callable[[], Any | None],
        prefer: TimePreference | None = None,
    ) -> QueryResult:
        """Return the top-k results of the scope for `query_text` and the search's stats.

        `prefer`: the turns inside the time the query names (the temporal arm); None: no arm.
        """
        stats = QueryStats()
        self._local.stats = stats
        timer = StageTimer(stats)
        if k <= 0 or not str(query_text or "").strip():
            timer.total()
            return QueryResult([], stats)
        depth = max(config.arm_depth, 2 * k)
        corpus, view, rankings = self.rank(
            scope_id, query_text, filters, depth, stats, timer, config=config, embedder=embedder, prefer=prefer
        )
        if not rankings:
            timer.total()
            return QueryResult([], stats)
        names = list(rankings)
        fused = fusion.reciprocal_rank_fusion(
            [fusion.cap_per_source(rankings[name].ids, depth) for name in names],
            k=config.rrf_k,
            weights=[config.weight(name) for name in names],
        )
        ranks = {name: {chunk_id: rank for rank, chunk_id in enumerate(rankings[name].ids, start=1)} for name in names}
        timer.lap("fusion")

        candidates = self._focus(corpus, fused, focus_terms, config)
        timer.lap("focus")

        if use_reranker and reranker is not None and candidates and config.rerank_pool > 0:
            candidates = self._rerank(corpus, candidates, query_text, reranker, config, stats)
            timer.lap("rerank")

        results = []
        for final_rank, candidate in enumerate(candidates[:k], start=1):
            position = corpus.position[candidate.chunk_id]
            row = result_row(candidate.chunk_id, corpus.texts[position], corpus.metadatas[position])
            explain = hit_explain(
                candidate.chunk_id,
                rankings,
                ranks,
                rrf_score=candidate.rrf_score,
                fused_rank=candidate.fused_rank,
                focus_boost=candidate.focus_boost,
                rerank_score=candidate.rerank_score,
                final_rank=final_rank,
            )
            row["distance"] = explain["semantic_distance"]
            row["score"] = candidate.score
            row["explain"] = explain
            results.append(row)
        if expand_links:
            results.extend(self._expand_links(corpus, view, results, config))
            timer.lap("expand")
        timer.total()
        return QueryResult(results, stats)

    @staticmethod
    def _focus(
        corpus: Corpus, fused: list[tuple[str, float]], focus_terms: list[str] | None, config: RetrievalConfig
    ) -> list[Candidate]:
        """Turn the fused ranking into candidates, boosting those that mention a focus term."""
        focus = [phrase for phrase in (_phrase(term) for term in focus_terms or []) if phrase.strip()]
        candidates = []
        for fused_rank, (chunk_id, rrf_score) in enumerate(fused, start=1):
            boost = 0.0
            if focus:
                text = _phrase(corpus.texts[corpus.position[chunk_id]])
                if any(term in text for term in focus):
                    boost = config.focus_boost
            candidates.append(Candidate(chunk_id, rrf_score + boost, rrf_score, boost, fused_rank))
        if focus:
            candidates.sort(key=lambda c: (-c.score, c.fused_rank))
        return candidates

    @staticmethod
    def _rerank(
        corpus: Corpus,
        candidates: list[Candidate],
        query_text: str,
        reranker: Any,
        config: RetrievalConfig,
        stats: QueryStats,
    ) -> list[Candidate]:
        """Re-sort the first `rerank_pool` candidates by the reranker's score (ties: fused order)."""
        pool = candidates[: config.rerank_pool]
        scores = reranker.rerank(query_text, [corpus.texts[corpus.position[c.chunk_id]] for c in pool])
        if scores is None or len(scores) != len(pool):
            return candidates
        for candidate, score in zip(pool, scores):
            candidate.rerank_score = float(score)
        order = sorted(range(len(pool)), key=lambda i: (-pool[i].rerank_score, i))
        stats.reranked = True
        return [pool[i] for i in order] + candidates[len(pool) :]

    @staticmethod
    def _expand_links(
        corpus: Corpus, view: View, results: list[dict[str, Any]], config: RetrievalConfig
    ) -> list[dict[str, Any]]:
        """Return the lore entries linked from lore hits (one hop, capped), not already present."""
        present = {row["entry_id"] for row in results if row.get("entry_id")}
        lore_by_entry: dict[str, int] = {}
        for position in view.positions:
            metadata = corpus.metadatas[position]
            if metadata.get("chunk_type") == LORE and metadata.get("entry_id") and metadata.get("chunk_part", 0) == 0:
                lore_by_entry.setdefault(str(metadata["entry_id"]), int(position))
        expanded = []
        for row in results:
            if row.get("chunk_type") != LORE or not row.get("entry_id"):
                continue
            links = row["metadata"].get("links") or []
            if isinstance(links, str):
                links = [links]
            for linked in links:
                if len(expanded) >= config.link_expansion_cap:
                    return expanded
                if linked in present or linked not in lore_by_entry:
                    continue
                position = lore_by_entry[linked]
                extra = result_row(corpus.ids[position], corpus.texts[position], corpus.metadatas[position])
                extra["distance"] = None
                extra["score"] = 0.0
                extra["explain"] = expansion_explain(row["entry_id"])
                present.add(linked)
                expanded.append(extra)
        return expanded

"""The temporal arm: when a query names a time, the chunks of the turns inside it, ranked by the query.

The caller (`studio.memory.recall.temporal`, which reads the save's story time) hands the
search a `TimePreference`: the turns whose story time falls inside the time the query names
and a note for the explain record ("named time: May 2023 → turns 40-61 preferred"). The
arm then searches those turns only, as the engine searches the save: Chroma's nearest
chunks among them (the query's own embedding) and BM25 of their own text (the scores the
lexical arm computed over the whole view), fused by Reciprocal Rank Fusion into one best-first
list. Fused with the other arms at `RetrievalConfig.temporal_weight` (2: the named time is
the player's explicit intent, and it measured best), it lifts the memory of
the named time without hiding the rest: a question whose time was misread, or whose answer
was told later than it happened, still finds it through the other arms.

Why an arm and not a boost or a filter (docs/retrieval.md, "Named time"): a boost only
reorders what the other arms already found within their depth, while an evidence chunk a
month holds is often ranked far below that depth over the whole save; within the month it is
near the top. A filter would lose every answer told outside the named time.

Invariants: no `TimePreference` (the query names no time, or the save records no story time)
means no arm, no skip record and results identical to a search without it. The arm only
ranks chunks that pass the query's filter. It is skipped, with the reason, when no chunk
searched lies inside the named time, or when more than `temporal_max_share` of them do: a time
covering most of the story says little about which memory is meant, and the arm would
mostly repeat the semantic and lexical arms (evidence counted twice). Failure modes: the store failing during its nearest query leaves the BM25 half
(as the semantic arm degrades); no embedder or no BM25 backend leaves the other half.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from studio.memory.retrieval import fusion
from studio.memory.retrieval.exact import exact_nearest
from studio.memory.retrieval.store import is_store_failure, where_clause


@dataclass(frozen=True)
class TimePreference:
    """The turns inside the time a query names, and what the explain record says about it.

    `label`: the named time alone ("May 2023 (1 May 2023 – 31 May 2023)"), for the explain
    record of an item it lifted (a fact, a belief); `note` is the search's whole line.
    """

    turns: frozenset[int]
    note: str
    label: str = ""


def in_range_positions(arm_input) -> np.ndarray:
    """Return the view indices of the chunks whose turn is preferred (computed once per search:
    `skip_reason` and `rank` both ask, kept as the arm's `story_time` evidence)."""

    def positions() -> np.ndarray:
        turns = np.fromiter(arm_input.prefer.turns, dtype=np.int64, count=len(arm_input.prefer.turns))
        return np.flatnonzero(np.isin(arm_input.corpus.turn_ids[arm_input.view.positions], turns))

    return arm_input.evidence("story_time", positions)


def skip_reason(arm_input) -> str | None:
    """Why the temporal arm cannot run for this query, or None."""
    inside = in_range_positions(arm_input)
    if not len(inside):
        return "no chunk searched lies inside the named time"
    searched = len(arm_input.view.positions)
    if len(inside) > arm_input.config.temporal_max_share * searched:
        return (
            f"the named time holds {len(inside)} of the {searched} chunks searched: too wide to say which "
            "memory is meant (RetrievalConfig.temporal_max_share)"
        )
    return None


def rank(arm_input) -> tuple[list[str], dict[str, float]]:
    """Rank the preferred turns' chunks: nearest and BM25 within them, fused; return ids and RRF scores."""
    inside = in_range_positions(arm_input)
    lists: list[list[str]] = []
    if arm_input.embedder is not None and not arm_input.stats.vector_store_error:
        lists.append(_nearest_inside(arm_input, inside))
    if arm_input.view.own_index is not None and arm_input.terms():
        own = arm_input.bm25("own")[inside]
        order = np.lexsort((np.arange(len(inside)), -own))
        lists.append(arm_input.ids_at(inside[order][own[order] > 0]))
    fused = fusion.reciprocal_rank_fusion(lists, k=arm_input.config.rrf_k)
    if not arm_input.full:
        fused = fused[: arm_input.depth]
    return [chunk_id for chunk_id, _score in fused], dict(fused)


def _nearest_inside(arm_input, inside: np.ndarray) -> list[str]:
    """Chroma's nearest chunks among the preferred turns (a `where` on their turn ids)."""
    corpus, view = arm_input.corpus, arm_input.view
    depth = len(inside) if arm_input.full else min(arm_input.depth, len(inside))
    turns = np.unique(corpus.turn_ids[view.positions[inside]]).tolist()  # sorted, as Python ints
    conditions = [condition for condition in (arm_input.filters.chroma_where(),) if condition]
    conditions.append({"turn_id": {"$in": turns}})
    try:
        if len(inside) <= arm_input.config.exact_search_max:  # a few turns: exact, no metadata scan in Chroma
            ids, _distances = exact_nearest(arm_input, inside, depth)
        else:
            ids, _distances = arm_input.store.nearest(
                arm_input.scope_id, arm_input.query_vector(), where_clause(conditions), depth
            )
    except Exception as exc:
        if not is_store_failure(exc):
            raise
        return []
    wanted = set(arm_input.ids_at(inside))
    return [chunk_id for chunk_id in ids if chunk_id in wanted]

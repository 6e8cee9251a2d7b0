"""Rank fusion for hybrid search.

Algorithm adapted from Hindsight (MIT, engine/search/fusion.py), kept dependency-free and
deterministic. Ranked lists of document ids (one per retrieval arm: semantic, lexical, ...)
are fused into a single ranking with Reciprocal Rank Fusion (RRF).

RRF is rank-based, not score-based, on purpose: each arm scores on its own incomparable
scale (cosine distance versus BM25), so adding raw scores would let one arm's scale
dominate. RRF only looks at where a document ranks within each arm, which makes the arms
commensurable.
"""

from __future__ import annotations

from collections.abc import Sequence

DEFAULT_RRF_K = 60


def cap_per_source(ranked_ids: list[str], cap: int) -> list[str]:
    """Return the top `cap` ids of one arm's best-first ranking (`cap <= 0`: all of them).

    Applied per arm before fusion so one over-expanding backend cannot crowd out the
    others. The caller orders `ranked_ids` best-first; this only slices.
    """
    if cap <= 0:
        return list(ranked_ids)
    return list(ranked_ids[:cap])


def reciprocal_rank_fusion(
    ranked_lists: list[list[str]],
    k: int = 60,
    weights: Sequence[float] | None = None,
) -> list[tuple[str, float]]:
    """Merge several best-first id lists into one ranking by Reciprocal Rank Fusion.

    score(d) = sum over arms of weight(arm) / (k + rank(d)), rank 1-based within the arm;
    an arm without d adds nothing. `weights` (one per list, default 1.0 each) lets the
    engine trust one arm more than another; with the default this is plain RRF.

    Return (doc_id, score) pairs, best first. Equal scores keep the order in which the ids
    first appear across the input lists (list by list, best first), so identical inputs
    always give the identical ranking.
    """
    if weights is not None and len(weights) != len(ranked_lists):
        raise ValueError("weights must have one entry per ranked list")
    scores: dict[str, float] = {}
    first_seen: dict[str, int] = {}
    for arm, ranked in enumerate(ranked_lists):
        weight = 1.0 if weights is None else float(weights[arm])
        seen_in_arm: set[str] = set()
        for rank, doc_id in enumerate(ranked, start=1):
            if doc_id in seen_in_arm:
                continue  # a duplicate within one arm counts once, at its best rank
            seen_in_arm.add(doc_id)
            if doc_id not in first_seen:
                first_seen[doc_id] = len(first_seen)
                scores[doc_id] = 0.0
            scores[doc_id] += weight / (k + rank)
    return sorted(scores.items(), key=lambda item: (-item[1], first_seen[item[0]]))

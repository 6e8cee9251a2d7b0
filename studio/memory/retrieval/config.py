"""The search pipeline's knobs, in one frozen dataclass.

The defaults are the measured ones; docs/retrieval.md ("What each change bought") gives the
LoCoMo figures behind each. A VectorMemory reads its config at every query (the BM25 views
it caches were built with the config current at the time; `VectorMemory.set_config` drops
them).
"""

from __future__ import annotations

from dataclasses import dataclass

from studio.memory.retrieval import fusion


@dataclass(frozen=True)
class RetrievalConfig:
    """The search pipeline's knobs; the defaults are the measured ones (docs/retrieval.md)."""

    # "temporal" runs only for a query that names a time the save's story time places.
    arms: tuple[str, ...] = ("semantic", "lexical", "context", "turn", "temporal")
    stop_words: bool = True
    fold_inflections: bool = True
    rrf_k: int = fusion.DEFAULT_RRF_K
    arm_depth: int = 50  # each arm contributes its best `arm_depth` ids (cap_per_source)
    semantic_weight: float = 1.0
    lexical_weight: float = 1.0
    context_weight: float = 1.0
    turn_weight: float = 1.0
    # docs/retrieval.md "Named time" (bench/temporal_qa.py, LoCoMo questions naming a time):
    # weight 2 over 1 took evidence in the 1,500-token budget from +0.054 to +0.114; a time
    # holding more than half the chunks searched ("before August 3" late in a story) skips
    # the arm, which then only repeated the other arms and cost three questions their evidence.
    temporal_weight: float = 2.0
    temporal_max_share: float = 0.5
    context_window: int = 2  # neighbours read on each side, in write order
    # "save": neighbours across turn boundaries (views.py); "turn": only within the chunk's
    # turn (the rule before 2026-12-01, kept to measure against: bench/retrieval_quality.py).
    context_scope: str = "save"
    # The context and turn arms leave out chunks whose document there is their own text (or
    # the turn is the context): fusion counts one piece of evidence once. False: the old rule.
    count_evidence_once: bool = True
    bm25_k1: float = 1.5
    bm25_b: float = 0.5
    focus_boost: float = 0.005  # about what moving up several places in one arm is worth
    rerank_pool: int = 50
    # The semantic arm on a filtered corpus (issue 33). A Chroma `where` costs a metadata scan of
    # the rows it matches (10k chunks: ~1 ms without, ~70-100 ms with; 100k: ~1 s), so a filter
    # excluding at most `unfiltered_fetch_max` chunks asks Chroma without it for that many more
    # and drops them here (the filtered nearest are among them), and a filter keeping at most
    # `exact_search_max` chunks (the Lore Book among a long save's narrative, a named time's
    # turns) is searched exactly over their stored vectors, fetched once per chunk and cached:
    # the ANN index is the wrong tool for a few hundred rows out of 100,000.
    unfiltered_fetch_max: int = 1000
    exact_search_max: int = 2000
    link_expansion_cap: int = 3
    max_cached_scopes: int = 16
    max_views_per_scope: int = 8

    def weight(self, arm: str) -> float:
        """Return the fusion weight of the named arm (`<arm>_weight`)."""
        return float(getattr(self, f"{arm}_weight"))

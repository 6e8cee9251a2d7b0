"""The retrieval arms: small units that each rank a query's filtered corpus from one kind of evidence.

An arm declares the evidence it reads (`reads`, names from `EVIDENCE`), says why it cannot
run for a query (`skip_reason`), and ranks (`rank`): a best-first list of chunk ids with one
score per id. `run_arms` runs the enabled arms in `ARMS` order -- the fusion order, which
decides ties in RRF, whatever order `RetrievalConfig.arms` lists them in -- and records in
the query's stats each arm's ranking size, and for each arm that did not run, why.

The arms (docs/retrieval.md, "Search pipeline", has what each bought on LoCoMo):
- semantic: Chroma's nearest chunks to the query embedding;
- lexical: BM25 over each chunk's own text;
- context: BM25 over each chunk read with its neighbours in write order within the save
  (across turn boundaries, never past the query's horizon: views.py);
- turn: the chunks of the turns whose whole text matches best, each turn's chunks by their
  own BM25 score;
- temporal: only when the query names a time the save's story time places (`ArmInput.prefer`,
  temporal.py): the chunks of the turns inside it, nearest and BM25 within them, fused. A
  query that names no time has no temporal arm at all (`Arm.applies`): nothing ran, nothing
  was skipped, the results are those of the other arms.

Evidence is counted once: the context arm ranks only chunks whose context holds more than
their own text, the turn arm only chunks whose turn holds more than their own text and
differs from their context (`View.context_adds` / `turn_adds`, from the corpus's shape). An
arm left with no such chunk is skipped, and `skip_reason` says why ("one chunk per turn
...": a game save's narrative), so the explain panel shows it.

Invariants:
- Evidence is computed at most once per query, on first read, and shared: the turn arm
  reuses the own-text scores the lexical arm computed. Only positive BM25 scores count (in
  a small corpus BM25Okapi gives a term found in most documents a negative IDF).
- An arm only ranks chunks that pass the query's filter and are in the corpus snapshot the
  query reads (a chunk written since is not returned until the cache reloads).
- Each arm contributes at most `depth` ids (`full` lifts the cut, for "why not this
  chunk?"); the semantic arm's scores also hold the distance of every chunk Chroma returned
  (the explain record shows it even past the cut).

Failure modes: the vector store failing during the semantic arm is not an error: the arm
returns an empty ranking, `stats.semantic_available` turns False and
`stats.vector_store_error` says why, and the lexical arms answer from the cached corpus.
Any other exception propagates.

"""

from __future__ import annotations

import abc
import logging
from dataclasses import dataclass, field
from collections.abc import Callable
from typing import Any

import numpy as np

from studio.memory.embeddings import embedding
from studio.memory.retrieval import lexical, temporal
from studio.memory.retrieval.config import RetrievalConfig
from studio.memory.retrieval.corpus import Corpus, SearchFilter, View, index_terms
from studio.memory.retrieval.exact import exact_nearest
from studio.memory.retrieval.explain import QueryStats, StageTimer
from studio.memory.retrieval.store import ChunkStore, is_store_failure

logger = logging.getLogger(__name__)

EVIDENCE = {
    "query_embedding": "the query's vector from the embedding model",
    "nearest_chunks": "Chroma's nearest chunks to the query vector (the vector store)",
    "query_terms": "the query's BM25 index terms",
    "bm25_own": "BM25 of each chunk's own text",
    "bm25_context": "BM25 of each chunk read with its neighbours in write order (across turns)",
    "bm25_turn": "BM25 of each chunk's whole turn",
    "story_time": "the turns inside the time the query names, by the save's story time (the caller's)",
}


@dataclass(frozen=True)
class ArmRanking:
    """One arm's answer: chunk ids best first, and a score per id (BM25, or cosine distance)."""

    ids: list[str]
    scores: dict[str, float]


@dataclass
class ArmInput:
    """Everything the arms of one query read; evidence is computed lazily and kept."""

    scope_id: str
    query_text: str
    corpus: Corpus
    view: View
    filters: SearchFilter
    depth: int
    full: bool
    config: RetrievalConfig
    store: ChunkStore
    embedder: Any | None
    stats: QueryStats
    timer: StageTimer
    prefer: temporal.TimePreference | None = None
    _evidence: dict[str, Any] = field(default_factory=dict)

    @property
    def top(self) -> int | None:
        """How many ids an arm keeps (None: all)."""
        return None if self.full else self.depth

    def evidence(self, name: str, compute: Callable[[], Any]) -> Any:
        """Return the search's evidence `name`, computed once (`compute()`) and kept for the other arms."""
        if name not in self._evidence:
            self._evidence[name] = compute()
        return self._evidence[name]

    def terms(self) -> list[str]:
        return self.evidence("query_terms", lambda: index_terms(self.query_text, self.config))

    def bm25(self, kind: str) -> np.ndarray:
        """Return the positive BM25 scores per view position of `kind` ("own", "context", "turn")."""

        def compute() -> np.ndarray:
            index = {"own": self.view.own_index, "context": self.view.context_index, "turn": self.view.turn_index}[kind]
            scores = index.get_scores(self.terms())
            return np.where(scores > 0, scores, 0.0)

        return self.evidence(f"bm25_{kind}", compute)

    def query_vector(self) -> np.ndarray:
        def compute() -> np.ndarray:
            # Through the process-wide LRU: the context viewer and the narrator ask the same input.
            vector = embedding.embed_query(self.embedder, self.query_text)
            self.timer.lap("embed_query")
            return vector

        return self.evidence("query_embedding", compute)

    def ids_at(self, view_indices) -> list[str]:
        """Return the chunk ids at the given view positions."""
        return [self.corpus.ids[self.view.positions[i]] for i in view_indices]


class Arm(abc.ABC):
    """One ranking of the filtered corpus; subclasses set the class attributes and `rank`."""

    name: str = ""
    reads: tuple[str, ...] = ()
    stage: str = ""  # the timings key its time is added to

    def applies(self, arm_input: ArmInput) -> bool:
        """Whether the arm belongs to this query at all (False: not run, not recorded as skipped)."""
        return True

    def skip_reason(self, arm_input: ArmInput) -> str | None:
        """Return why this arm cannot run for the query, or None when it can."""
        return None

    @abc.abstractmethod
    def rank(self, arm_input: ArmInput) -> ArmRanking:
        """Rank the filtered corpus for the query."""


class SemanticArm(Arm):
    name = "semantic"
    reads = ("query_embedding", "nearest_chunks")
    stage = "semantic"

    def skip_reason(self, arm_input: ArmInput) -> str | None:
        if arm_input.stats.vector_store_error:
            return "vector store unreachable"
        if arm_input.embedder is None:
            return "no embedding runtime"
        if not len(arm_input.view.positions):
            return "no chunk passes the filters"
        return None

    def rank(self, arm_input: ArmInput) -> ArmRanking:
        corpus, view, stats = arm_input.corpus, arm_input.view, arm_input.stats
        query_vector = arm_input.query_vector()
        depth = len(view.positions) if arm_input.full else arm_input.depth
        # A Chroma `where` costs a metadata scan of the rows it matches (measured on a
        # 10k-chunk collection: ~1 ms without, ~70-100 ms with), while the save is the
        # collection itself. So the query goes without `where` when the cached corpus
        # shows the filters exclude nothing or only a few chunks: those are fetched
        # too and dropped here. Only a filter cutting many chunks goes to Chroma.
        excluded = len(corpus.ids) - len(view.positions)
        config = arm_input.config
        try:
            if excluded <= max(3 * depth, config.unfiltered_fetch_max):
                ids, distances = arm_input.store.nearest(arm_input.scope_id, query_vector, None, depth + excluded)
            elif len(view.positions) <= config.exact_search_max:
                ids, distances = exact_nearest(arm_input, np.arange(len(view.positions)), depth)
            else:
                ids, distances = arm_input.store.nearest(
                    arm_input.scope_id, query_vector, arm_input.filters.chroma_where(), depth
                )
        except Exception as exc:
            if not is_store_failure(exc):
                raise
            # The lexical arms run on the cached corpus: the query degrades, it does not fail.
            stats.semantic_available = False
            stats.vector_store_error = f"{type(exc).__name__}: {exc}"[:300]
            logger.warning("vector store unreachable, semantic arm skipped for %s: %s", arm_input.scope_id, exc)
            ids, distances = [], {}
        # Keep chunks that pass the filter and were in the snapshot (not written since).
        ids = [chunk_id for chunk_id in ids if chunk_id in corpus.position and view.member[corpus.position[chunk_id]]][
            :depth
        ]
        return ArmRanking(ids, distances)


class _BM25Arm(Arm):
    stage = "lexical"

    def skip_reason(self, arm_input: ArmInput) -> str | None:
        if not len(arm_input.view.positions):
            return "no chunk passes the filters"
        if arm_input.view.own_index is None:
            return "no BM25 backend (rank_bm25)"
        if not arm_input.terms():
            return "the query has no index terms"
        return None


class OwnTextArm(_BM25Arm):
    name = "lexical"
    reads = ("query_terms", "bm25_own")
    kind = "own"

    def rank(self, arm_input: ArmInput) -> ArmRanking:
        scores = arm_input.bm25(self.kind)
        ranked = lexical.ranked_indices(scores, arm_input.top)
        ids = arm_input.ids_at(ranked)
        return ArmRanking(ids, {chunk_id: float(scores[i]) for chunk_id, i in zip(ids, ranked)})


class ContextArm(_BM25Arm):
    name = "context"
    reads = ("query_terms", "bm25_context")

    def skip_reason(self, arm_input: ArmInput) -> str | None:
        return super().skip_reason(arm_input) or arm_input.view.shape_note(self.name)

    def rank(self, arm_input: ArmInput) -> ArmRanking:
        # A chunk without neighbours would repeat its lexical evidence: left out.
        scores = np.where(arm_input.view.context_adds, arm_input.bm25("context"), 0.0)
        ranked = lexical.ranked_indices(scores, arm_input.top)
        ids = arm_input.ids_at(ranked)
        return ArmRanking(ids, {chunk_id: float(scores[i]) for chunk_id, i in zip(ids, ranked)})


class TurnArm(_BM25Arm):
    name = "turn"
    reads = ("query_terms", "bm25_own", "bm25_turn")

    def skip_reason(self, arm_input: ArmInput) -> str | None:
        return super().skip_reason(arm_input) or arm_input.view.shape_note(self.name)

    def rank(self, arm_input: ArmInput) -> ArmRanking:
        own = arm_input.bm25("own")
        per_chunk_turn = arm_input.bm25("turn")[arm_input.view.turn_of_position]
        # A chunk alone in its turn (or whose turn is its context) would repeat evidence: left out.
        candidates = np.flatnonzero((per_chunk_turn > 0) & (own > 0) & arm_input.view.turn_adds)
        # Best turns first; within a turn by own score; then corpus order.
        order = np.lexsort((np.arange(len(candidates)), -own[candidates], -per_chunk_turn[candidates]))
        ranked = candidates[order] if arm_input.full else candidates[order][: arm_input.depth]
        ids = arm_input.ids_at(ranked)
        return ArmRanking(ids, {chunk_id: float(per_chunk_turn[i]) for chunk_id, i in zip(ids, ranked)})


class TemporalArm(Arm):
    name = "temporal"
    reads = ("story_time", "query_embedding", "nearest_chunks", "query_terms", "bm25_own")
    stage = "semantic"  # mostly its nearest query among the preferred turns

    def applies(self, arm_input: ArmInput) -> bool:
        return arm_input.prefer is not None

    def skip_reason(self, arm_input: ArmInput) -> str | None:
        if not len(arm_input.view.positions):
            return "no chunk passes the filters"
        return temporal.skip_reason(arm_input)

    def rank(self, arm_input: ArmInput) -> ArmRanking:
        ids, scores = temporal.rank(arm_input)
        return ArmRanking(ids, scores)


ARMS: tuple[Arm, ...] = (SemanticArm(), OwnTextArm(), ContextArm(), TurnArm(), TemporalArm())


def run_arms(arm_input: ArmInput, enabled: tuple[str, ...]) -> dict[str, ArmRanking]:
    """Run the enabled arms in fusion order; return arm name -> ranking of the arms that ran."""
    stats = arm_input.stats
    stats.semantic_available = arm_input.embedder is not None and not stats.vector_store_error
    stats.lexical_available = lexical.is_available()
    rankings: dict[str, ArmRanking] = {}
    for arm in ARMS:
        if not arm.applies(arm_input):
            continue
        if arm.name not in enabled:
            stats.skipped_arms[arm.name] = "not in RetrievalConfig.arms"
            continue
        reason = arm.skip_reason(arm_input)
        if reason is not None:
            stats.skipped_arms[arm.name] = reason
            continue
        rankings[arm.name] = arm.rank(arm_input)
        arm_input.timer.lap(arm.stage)
    stats.arm_sizes = {name: len(ranking.ids) for name, ranking in rankings.items()}
    return rankings

"""BM25 views of a corpus: the chunks passing one filter, their three indexes, built or extended.

A view holds, for the chunks of a corpus passing one filter (in corpus order), three BM25
indexes over "documents" that are unions of chunks:
- own: each chunk alone;
- context: each chunk read with its `context_window` neighbours on each side in *write
  order within the save*, in a chain per chunk type: a turn that fills the window on its
  own (>= 2 x window + 1 chunks: a LoCoMo session) is read alone, a smaller turn reads
  across its boundaries into the turns before and after (a game's one narrative chunk a
  turn); each lore entry is a chain of its own (its parts read each other, entries never
  read each other). Only chunks of the view are neighbours, so a chunk past the query's
  turn horizon (a rewound or future turn) never enters a context document or its score;
- turn: each chunk's whole group (its turn's chunks of its type; a lore entry's parts).

Arms whose document for a chunk equals another arm's document for it repeat that arm's
evidence: `context_adds` marks the chunks whose context document holds more than the chunk
itself, `turn_adds` those whose turn document holds more than the chunk and differs from its
context document. The context and turn arms rank only those chunks (arms.py), so fusion
counts one piece of evidence once, and an arm with none left is skipped with the reason
`shape_note` gives. This depends only on the corpus's shape (chunks per turn), not on data.

Indexes (`ViewIndex`, segments.py) use BM25Okapi's formula, IDF and epsilon floor (tested
equal to rank_bm25 on the concatenated documents), over per-chunk term ids and counts the
corpus keeps (`Corpus.term_ids` / `term_counts`, one vocabulary per scope, append-only),
built with numpy, their postings in segments of consecutive documents. `extend_view` updates a
view for chunks appended after every chunk it holds (a new turn's writes): the documents
that change (the new ones, the last neighbours of each chain, the last group) lie in the
indexes' open tail segment, which is rebuilt; every sealed segment is shared. `truncate_view`
is the inverse for a removal of the view's last chunks (a rewind): the segments from the
first changed document on are rebuilt. Either gives the very index a cold build gives (same
lengths, same IDF array, the same postings per document: scores equal exactly, tested). A
removal in the middle or an insert before existing chunks has no incremental path: the
cache drops the views and the next query builds the one it needs (corpus.py). A chunk's
chain and group come from the corpus's chain codes (one per chunk, computed when it entered
the corpus), numbered in the view with numpy.

Views are immutable once built: extending returns a new view and shares unchanged arrays.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from studio.memory.retrieval import lexical
from studio.memory.retrieval.chunks import LORE
from studio.memory.retrieval.config import RetrievalConfig
from studio.memory.retrieval.segments import EMPTY, ViewIndex
from studio.memory.retrieval.table import raw

if TYPE_CHECKING:  # pragma: no cover
    from studio.memory.retrieval.corpus import Corpus


@dataclass
class Structure:
    """Which chunks make each document of a view (view indices, CSR target -> members)."""

    context_indptr: np.ndarray
    context_members: np.ndarray
    group_of: np.ndarray  # per view index: its turn document
    group_indptr: np.ndarray
    group_members: np.ndarray
    context_span: np.ndarray  # per view index: (first member, last member, count), to see changes
    context_adds: np.ndarray  # per view index: its context document holds more than itself
    turn_adds: np.ndarray  # per view index: its turn document holds more than itself and its context
    kept: int = 0  # `structure_after`: the view indices before this are the old structure's, unchanged


@dataclass
class View:
    """The chunks of a corpus passing one filter, with their BM25 indexes (None without rank_bm25)."""

    positions: np.ndarray  # corpus positions, in corpus order
    own_index: Any
    context_index: Any
    turn_index: Any
    turn_of_position: np.ndarray  # per view position: its group (turn) document
    member: np.ndarray = None  # per corpus position: passes the filter
    structure: Structure | None = None

    @property
    def context_adds(self) -> np.ndarray:
        return self.structure.context_adds

    @property
    def turn_adds(self) -> np.ndarray:
        return self.structure.turn_adds

    def shape_note(self, arm: str) -> str | None:
        """Why an arm adds nothing for this view's shape (None: it adds evidence for some chunk)."""
        count = len(self.positions)
        if arm == "context" and count and not self.context_adds.any():
            return "no chunk has a neighbour: each context is the chunk's own text (the lexical arm)"
        if arm == "turn" and count and not self.turn_adds.any():
            groups = int(self.turn_of_position.max()) + 1
            if groups == count:
                return f"one chunk per turn ({count} chunks, {groups} turns): each turn is the chunk's own text (the lexical arm)"
            return "every turn is read whole by the context arm already"
        return None


def chain_key(metadata: dict[str, Any], chunk_id: str) -> tuple:
    """The context chain of a chunk: its chunk type, or its own lore entry (entries never read each other)."""
    chunk_type = str(metadata.get("chunk_type", ""))
    if chunk_type == LORE:
        return ("lore", str(metadata.get("entry_id") or chunk_id))
    return ("type", chunk_type)


def chain_codes_of(corpus: Corpus) -> np.ndarray:
    """Return the corpus's chain code per chunk (computed once for a corpus built without them)."""
    if corpus.chain_codes is None:
        corpus.chain_codes = np.asarray(
            [
                corpus.chain_index.setdefault(chain_key(m, i), len(corpus.chain_index))
                for i, m in zip(corpus.ids, corpus.metadatas)
            ],
            dtype=np.int64,
        )
    return corpus.chain_codes


def _sorted(values: np.ndarray) -> bool:
    return bool(len(values) < 2 or (values[1:] >= values[:-1]).all())


def _first_seen_codes(values: np.ndarray) -> np.ndarray:
    """Number values by first appearance (stable under appends: old values keep their numbers).

    Values already in order (a view's chains and turns are, but for a lore entry synced apart)
    are numbered in one linear pass, without sorting a long save's chunks again.
    """
    if not len(values):
        return EMPTY
    if _sorted(values):
        return np.concatenate([[0], np.cumsum(values[1:] != values[:-1])]).astype(np.int64)
    unique, first, inverse = np.unique(values, return_index=True, return_inverse=True)
    rank = np.empty(len(unique), dtype=np.int64)
    rank[np.argsort(first, kind="stable")] = np.arange(len(unique), dtype=np.int64)
    return rank[inverse.ravel()]


def _chain_and_group(corpus: Corpus, positions: np.ndarray, config: RetrievalConfig) -> tuple[np.ndarray, np.ndarray]:
    """Per view index: its chain and its group (chain and turn: a lore entry is one group), numbered by first
    appearance; from the corpus's chain codes, so no chunk's metadata is read again."""
    chains = chain_codes_of(corpus)[positions]
    turns = corpus.turn_ids[positions]
    groups = chains * (int(turns.max()) + 1 if len(turns) else 1) + turns
    group_of = _first_seen_codes(groups)
    chain_of = group_of if config.context_scope == "turn" else _first_seen_codes(chains)
    return chain_of, group_of


def _csr(owner: np.ndarray, n_owners: int) -> tuple[np.ndarray, np.ndarray]:
    order = np.arange(len(owner)) if _sorted(owner) else np.argsort(owner, kind="stable")
    indptr = np.concatenate([[0], np.cumsum(np.bincount(owner, minlength=n_owners))]).astype(np.int64)
    return indptr, order.astype(np.int64)


def build_structure(corpus: Corpus, positions: np.ndarray, config: RetrievalConfig) -> Structure:
    """Compute each chunk's context and turn documents and whether they add to its own."""
    window = config.context_window
    count = len(positions)
    if not count:
        return Structure(
            EMPTY,
            EMPTY,
            EMPTY,
            np.zeros(1, dtype=np.int64),
            EMPTY,
            np.zeros((0, 3), dtype=np.int64),
            np.zeros(0, dtype=bool),
            np.zeros(0, dtype=bool),
        )
    chain_of, group_of = _chain_and_group(corpus, positions, config)
    # Chain order: chains one after another, each in view (= write) order (the view's own order when its
    # chains already follow one another: no sort).
    if _sorted(chain_of):
        order = at = np.arange(count, dtype=np.int64)
    else:
        order = np.argsort(chain_of, kind="stable").astype(np.int64)
        at = np.empty(count, dtype=np.int64)
        at[order] = np.arange(count)
    chain_sizes = np.bincount(chain_of)
    chain_start = (np.cumsum(chain_sizes) - chain_sizes)[chain_of]
    chain_end = chain_start + chain_sizes[chain_of]
    window = max(0, int(window))
    once = config.count_evidence_once
    n_groups = int(group_of.max()) + 1
    group_indptr, group_members = _csr(group_of, n_groups)
    group_sizes = np.diff(group_indptr)[group_of]
    # A group is contiguous in its chain and starts at its first member in view order (numbered by first
    # appearance, so group g's first member is where the running maximum first reaches g).
    firsts = np.flatnonzero(np.concatenate([[True], group_of[1:] > np.maximum.accumulate(group_of)[:-1]]))
    group_low = at[firsts]
    low = np.maximum(chain_start, at - window)
    high = np.minimum(chain_end, at + window + 1)
    # A turn that fills the window on its own is read alone (a session, a long turn); smaller
    # turns (one narrative chunk) read across their boundaries into the turns around them.
    whole = group_sizes >= 2 * window + 1
    low = np.where(whole, np.maximum(low, group_low[group_of]), low)
    high = np.where(whole, np.minimum(high, group_low[group_of] + group_sizes), high)
    fanout = high - low
    context_indptr = np.concatenate([[0], np.cumsum(fanout)]).astype(np.int64)
    offsets = np.arange(int(fanout.sum())) - np.repeat(context_indptr[:-1], fanout)
    context_members = order[np.repeat(low, fanout) + offsets]
    same_as_context = (group_low[group_of] == low) & (group_sizes == fanout)
    return Structure(
        context_indptr=context_indptr,
        context_members=context_members.astype(np.int64),
        context_span=np.stack([order[low], order[high - 1], fanout], axis=1),
        group_of=group_of,
        group_indptr=group_indptr,
        group_members=group_members,
        context_adds=(fanout > 1) if once else np.ones(count, dtype=bool),
        turn_adds=((group_sizes > 1) & ~same_as_context) if once else np.ones(count, dtype=bool),
    )


def structure_after(
    old: Structure, corpus: Corpus, positions: np.ndarray, same: int, config: RetrievalConfig
) -> Structure:
    """The structure of `positions`, whose first `same` chunks are those of the view `old` describes (an append
    after them, or a cut to them): equal to `build_structure`, computed only from the last groups on.

    When the view's chains and turns are in order (a game's narrative after its Lore Book), an append or a cut
    changes only the chunks within a window of the old end and the last turn: the structure is recomputed from
    the start of the turn holding the first of them (with a window before it to read), the rest kept. Otherwise
    it is built whole.
    """
    window = max(0, int(config.context_window))
    chains = chain_codes_of(corpus)[positions]
    turns = corpus.turn_ids[positions]
    if same < 1 or not (_sorted(chains) and _sorted(chains * (int(turns.max()) + 1) + turns)):
        return build_structure(corpus, positions, config)
    last_group = int(old.group_of[same - 1])
    first = min(int(old.group_indptr[last_group]), max(same - window, 0))
    start = int(old.group_indptr[old.group_of[first]])  # the turn holding it, from its first chunk
    if start <= window:
        return build_structure(corpus, positions, config)
    offset = start - window
    sub = build_structure(corpus, positions[offset:], config)
    k = window  # `start` in the sub-view
    base_group = int(old.group_of[offset])
    group = int(old.group_of[start])
    sub_group = group - base_group
    return Structure(
        context_indptr=np.concatenate(
            [
                old.context_indptr[: start + 1],
                old.context_indptr[start] + sub.context_indptr[k + 1 :] - sub.context_indptr[k],
            ]
        ),
        context_members=np.concatenate(
            [old.context_members[: old.context_indptr[start]], sub.context_members[sub.context_indptr[k] :] + offset]
        ),
        group_of=np.concatenate([old.group_of[:start], sub.group_of[k:] + base_group]),
        group_indptr=np.concatenate(
            [
                old.group_indptr[: group + 1],
                old.group_indptr[group] + sub.group_indptr[sub_group + 1 :] - sub.group_indptr[sub_group],
            ]
        ),
        group_members=np.concatenate(
            [old.group_members[: old.group_indptr[group]], sub.group_members[sub.group_indptr[sub_group] :] + offset]
        ),
        context_span=np.concatenate([old.context_span[:start], sub.context_span[k:] + np.array([offset, offset, 0])]),
        context_adds=np.concatenate([old.context_adds[:start], sub.context_adds[k:]]),
        turn_adds=np.concatenate([old.turn_adds[:start], sub.turn_adds[k:]]),
        kept=start,
    )


class _Base:
    """The own documents of a view's chunks: term ids, counts and lengths, gathered per view index.

    `flat=True` concatenates every chunk's arrays once (a cold build reads them all three
    times); otherwise each gather reads the corpus's per-chunk arrays (an extension reads few).
    """

    def __init__(self, corpus: Corpus, positions: np.ndarray, *, flat: bool):
        self.corpus, self.positions = corpus, positions
        self.doc_lens = corpus.doc_lens[positions] if len(positions) else EMPTY
        self.flat = flat
        # The corpus's own lists (positions are below its length), not their read-only prefixes: no call per item.
        self.term_ids, self.term_counts = raw(corpus.term_ids), raw(corpus.term_counts)
        if flat:
            listed = positions.tolist()
            term_ids, term_counts = self.term_ids, self.term_counts
            sizes = np.asarray([len(term_ids[p]) for p in listed], dtype=np.int64)
            self.indptr = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
            self.terms = np.concatenate([term_ids[p] for p in listed]) if listed else EMPTY
            self.counts = np.concatenate([term_counts[p] for p in listed]) if listed else EMPTY

    def gather(self, view_indices: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Return per member its number of distinct terms, then all their term ids and counts."""
        if self.flat:
            sizes = self.indptr[view_indices + 1] - self.indptr[view_indices]
            starts = np.repeat(self.indptr[view_indices], sizes)
            offsets = np.arange(int(sizes.sum())) - np.repeat(np.cumsum(sizes) - sizes, sizes)
            return sizes, self.terms[starts + offsets], self.counts[starts + offsets]
        listed = self.positions[view_indices].tolist()
        terms = [self.term_ids[p] for p in listed]
        counts = [self.term_counts[p] for p in listed]
        sizes = np.asarray([len(t) for t in terms], dtype=np.int64)
        return sizes, (np.concatenate(terms) if terms else EMPTY), (np.concatenate(counts) if counts else EMPTY)


def _index(
    corpus: Corpus,
    base: _Base,
    indptr,
    members,
    n_targets: int,
    config: RetrievalConfig,
    old: ViewIndex | None = None,
    first_changed: int = 0,
) -> ViewIndex:
    """Build the index of `n_targets` documents, or update `old` from its first changed document on (segments.py)."""
    if old is None:
        return ViewIndex.build(corpus.vocab, base, indptr, members, n_targets, k1=config.bm25_k1, b=config.bm25_b)
    return old.updated(corpus.vocab, base, indptr, members, n_targets, first_changed)


def _first(changed: np.ndarray, otherwise: int) -> int:
    return int(changed.min()) if len(changed) else otherwise


def _view(corpus, positions, structure, own, context, turn) -> View:
    member = np.zeros(len(corpus.ids), dtype=bool)
    member[positions] = True
    return View(
        positions=positions,
        own_index=own,
        context_index=context,
        turn_index=turn,
        turn_of_position=structure.group_of,
        member=member,
        structure=structure,
    )


def build_view(corpus: Corpus, positions: np.ndarray, config: RetrievalConfig) -> View:
    """Build the view of the chunks at `positions` (in corpus order) from scratch."""
    positions = np.asarray(positions, dtype=np.int64)
    count = len(positions)
    structure = build_structure(corpus, positions, config)
    own = context = turn = None
    if lexical.is_available() and count:
        base = _Base(corpus, positions, flat=True)
        identity = np.arange(count + 1, dtype=np.int64)
        own = _index(corpus, base, identity, identity[:-1], count, config)
        context = _index(corpus, base, structure.context_indptr, structure.context_members, count, config)
        turn = _index(
            corpus, base, structure.group_indptr, structure.group_members, len(structure.group_indptr) - 1, config
        )
    return _view(corpus, positions, structure, own, context, turn)


def truncate_view(old: View, corpus: Corpus, count: int, config: RetrievalConfig) -> View:
    """Return `old` cut to its first `count` chunks: the chunks after them were removed (a rewind).

    `corpus` holds the kept chunks at their old positions. The documents the cut removed, and
    the kept ones whose context or turn lost members, are in the indexes' last segments, which
    are rebuilt (segments.py); the result is the index a cold build of the kept chunks gives.
    """
    n_old = len(old.positions)
    positions = old.positions[:count]
    if count == n_old:  # nothing this view holds was removed
        return _view(corpus, positions, old.structure, old.own_index, old.context_index, old.turn_index)
    if not isinstance(old.own_index, ViewIndex) or not count:
        return build_view(corpus, positions, config)
    structure = structure_after(old.structure, corpus, positions, count, config)
    base = _Base(corpus, positions, flat=False)
    identity = np.arange(count + 1, dtype=np.int64)
    own = _index(corpus, base, identity, identity[:-1], count, config, old.own_index, count)
    kept = structure.kept  # the documents before it are the old ones (`structure_after`): only the rest compared
    changed = kept + np.flatnonzero(
        (structure.context_span[kept:] != old.structure.context_span[kept:count]).any(axis=1)
    )
    context = _index(
        corpus,
        base,
        structure.context_indptr,
        structure.context_members,
        count,
        config,
        old.context_index,
        _first(changed, count),
    )
    n_groups, kept_groups = len(structure.group_indptr) - 1, int(structure.group_of[kept]) if kept < count else 0
    shrunk = kept_groups + np.flatnonzero(
        np.diff(structure.group_indptr[kept_groups:]) != np.diff(old.structure.group_indptr[kept_groups : n_groups + 1])
    )
    turn = _index(
        corpus,
        base,
        structure.group_indptr,
        structure.group_members,
        n_groups,
        config,
        old.turn_index,
        _first(shrunk, n_groups),
    )
    return _view(corpus, positions, structure, own, context, turn)


def extend_view(old: View, corpus: Corpus, positions: np.ndarray, config: RetrievalConfig) -> View:
    """Return `old` updated to `positions`, which must start with old's positions (appends only)."""
    positions = np.asarray(positions, dtype=np.int64)
    n_old, count = len(old.positions), len(positions)
    if n_old == count:  # nothing new passes this view's filter
        return _view(corpus, positions, old.structure, old.own_index, old.context_index, old.turn_index)
    if not isinstance(old.own_index, ViewIndex) or not n_old:  # nothing to extend
        return build_view(corpus, positions, config)
    structure = structure_after(old.structure, corpus, positions, n_old, config)
    base = _Base(corpus, positions, flat=False)
    identity = np.arange(count + 1, dtype=np.int64)
    own = _index(corpus, base, identity, identity[:-1], count, config, old.own_index, n_old)
    # A context changes when its neighbours do (the last of a chain; a small last turn that
    # grows to fill the window is read alone from then on, so it may also lose members).
    kept = min(structure.kept, n_old)  # the documents before it are the old ones: only the rest compared
    changed = kept + np.flatnonzero(
        (structure.context_span[kept:n_old] != old.structure.context_span[kept:]).any(axis=1)
    )
    context = _index(
        corpus,
        base,
        structure.context_indptr,
        structure.context_members,
        count,
        config,
        old.context_index,
        _first(changed, n_old),
    )
    n_groups, n_old_groups = len(structure.group_indptr) - 1, len(old.structure.group_indptr) - 1
    kept_groups = min(int(structure.group_of[kept]), n_old_groups) if kept < count else n_old_groups
    grown = kept_groups + np.flatnonzero(
        np.diff(structure.group_indptr[kept_groups : n_old_groups + 1])
        != np.diff(old.structure.group_indptr[kept_groups:])
    )
    turn = _index(
        corpus,
        base,
        structure.group_indptr,
        structure.group_members,
        n_groups,
        config,
        old.turn_index,
        _first(grown, n_old_groups),
    )
    return _view(corpus, positions, structure, own, context, turn)

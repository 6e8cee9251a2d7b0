"""A BM25 index in segments: a change rebuilds the segments it touches, never the whole index.

A view's index (views.py: own text, context, turn) holds one document per chunk or turn, in
view order. Its postings are split into segments of consecutive documents: sealed segments of
`SEAL` documents (merged, `MERGE` at a time, into segments of the next level: 64, 512,
4,096, 32,768 documents) and an open tail of the last documents, never fewer than `KEEP_OPEN`,
rebuilt on every change. What an append changes (the new documents, and the contexts and turn
of the chunks just before them) and what a rewind by a few turns removes lie in the tail, so
a turn costs the tail's rebuild, not the save's postings (issue 33: copying every posting list
a new chunk's terms hit grew with the save, ~90 ms a view at 100,000 chunks).

Global per index: the document lengths, each term's document frequency (the sum over
segments: a rebuild subtracts the old segments' counts and adds the new ones'), the IDF and
the average length. `get_scores` adds each query term's contribution document by document
from every segment's postings: the scores equal a cold build's exactly however the postings
are split (the same IDF, lengths and formula per document), which the tests check.

Invariants: segments are immutable and shared between an index and the index updated from it;
documents before the first changed one keep their ids and postings; a rebuild covers whole
segments, from the first one holding a changed document to the end.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

EMPTY = np.zeros(0, dtype=np.int64)
SEAL = 64  # documents in a sealed segment of the first level
KEEP_OPEN = 64  # the last documents are never sealed: an append or a short rewind changes only these
MERGE = 8  # sealed segments of one level that merge into one of the next
MAX_LEVEL = 3  # 64 x 8^3 = 32,768 documents: a merge never concatenates more


@dataclass(frozen=True)
class Segment:
    """The postings of documents start..end-1, by term: `terms` (sorted term ids) and, for the i-th,
    documents `docs[indptr[i]:indptr[i + 1]]` (ascending) with their `counts`."""

    start: int
    end: int
    level: int  # -1: the open tail
    terms: np.ndarray
    indptr: np.ndarray
    docs: np.ndarray
    counts: np.ndarray

    @property
    def df(self) -> np.ndarray:
        return np.diff(self.indptr)

    def lookup(self, term_id: int):
        """Return (docs, counts) of `term_id` in this segment, or None."""
        i = int(np.searchsorted(self.terms, term_id))
        if i < len(self.terms) and self.terms[i] == term_id:
            return self.docs[self.indptr[i] : self.indptr[i + 1]], self.counts[self.indptr[i] : self.indptr[i + 1]]
        return None


def pairs(base, indptr: np.ndarray, members: np.ndarray, targets: np.ndarray):
    """Return (target, term id, count) summed over each target's members (ordered by target, then term), and the
    targets' lengths."""
    sizes = indptr[targets + 1] - indptr[targets]
    starts = np.repeat(indptr[targets], sizes)
    offsets = np.arange(int(sizes.sum())) - np.repeat(np.cumsum(sizes) - sizes, sizes)
    member_index = members[starts + offsets]
    slot = np.repeat(np.arange(len(targets)), sizes)  # the target (by its slot) of each member
    doc_len = np.bincount(slot, weights=base.doc_lens[member_index], minlength=len(targets)).astype(np.int64)
    term_sizes, term_ids, counts = base.gather(member_index)
    if not len(term_ids):
        return EMPTY, EMPTY, EMPTY, doc_len
    pair_target = np.repeat(targets[slot], term_sizes)
    width = int(term_ids.max()) + 1
    key = pair_target * width + term_ids
    unique, inverse = np.unique(key, return_inverse=True)
    summed = np.bincount(inverse.ravel(), weights=counts).astype(np.int64)
    return unique // width, unique % width, summed, doc_len


def _by_term(start: int, end: int, level: int, docs: np.ndarray, terms: np.ndarray, counts: np.ndarray) -> Segment:
    """A segment from (doc, term, count) triples ordered by doc: regrouped by term, docs ascending within a term."""
    order = np.argsort(terms, kind="stable")
    terms, docs, counts = terms[order], docs[order], counts[order]
    if len(terms):
        firsts = np.concatenate([[0], np.flatnonzero(terms[1:] != terms[:-1]) + 1])
    else:
        firsts = EMPTY
    indptr = np.concatenate([firsts, [len(terms)]]).astype(np.int64)
    return Segment(start, end, level, terms[firsts], indptr, docs, counts)


def _merged(segments: list[Segment]) -> Segment:
    """One segment of the next level holding the postings of consecutive `segments`."""
    docs = np.concatenate([s.docs for s in segments])
    terms = np.concatenate([np.repeat(s.terms, np.diff(s.indptr)) for s in segments])
    counts = np.concatenate([s.counts for s in segments])
    # Segment by segment the docs ascend, so a stable sort by term keeps them ascending within each term.
    return _by_term(segments[0].start, segments[-1].end, segments[0].level + 1, docs, terms, counts)


def _sizes(start: int, end: int) -> list[tuple[int, int, int]]:
    """The (start, end, level) of the segments documents start..end-1 are built into: the largest levels that fit
    while `KEEP_OPEN` documents stay open, then the open tail."""
    out, position = [], start
    for level in range(MAX_LEVEL, -1, -1):
        size = SEAL * MERGE**level
        while end - position >= size + KEEP_OPEN:
            out.append((position, position + size, level))
            position += size
    out.append((position, end, -1))
    return out


def _layout(base, indptr, members, start: int, end: int, sealed: list[Segment]) -> tuple[list[Segment], np.ndarray]:
    """Build documents start..end-1 after `sealed` (one pass for their postings, then cut into segments), merge a
    run of `MERGE` segments of one level at the end into one of the next; return every segment and the new lengths."""
    targets = np.arange(start, end, dtype=np.int64)
    pair_target, pair_term, pair_count, lengths = pairs(base, indptr, members, targets)
    segments = list(sealed)
    for low, high, level in _sizes(start, end):
        if high <= low:
            continue
        a, b = np.searchsorted(pair_target, [low, high])
        segments.append(_by_term(low, high, level, pair_target[a:b], pair_term[a:b], pair_count[a:b]))
        if level >= 0:
            _merge_runs(segments)
    return segments, lengths


def _merge_runs(segments: list[Segment]) -> None:
    """Merge a run of `MERGE` sealed segments of one level at the end into one of the next, again while one forms."""
    while len(segments) >= MERGE:
        run = segments[-MERGE:]
        level = run[-1].level
        if level < 0 or level >= MAX_LEVEL or any(s.level != level for s in run):
            return
        segments[-MERGE:] = [_merged(run)]


class ViewIndex:
    """BM25 over documents given as postings per term id, in segments (BM25Okapi's formula and IDF)."""

    def __init__(
        self,
        vocab: dict[str, int],
        doc_len: np.ndarray,
        segments: list[Segment],
        df: np.ndarray,
        *,
        k1: float,
        b: float,
        epsilon: float = 0.25,
        df_counts: np.ndarray | None = None,
        length_sum: int | None = None,
    ):
        self.vocab, self.doc_len_array, self.segments, self.df = vocab, doc_len, segments, df
        self.k1, self.b, self.epsilon = k1, b, epsilon
        self.corpus_size = len(doc_len)
        # How many terms have each document frequency (`df_counts[d]`): the mean IDF over the vocabulary is a sum
        # over the few distinct frequencies, kept up to date by `updated` from the terms a change touched.
        self.df_counts = np.bincount(df) if df_counts is None else df_counts
        self.length_sum = int(doc_len.sum()) if length_sum is None else length_sum
        self.avgdl = float(self.length_sum) / self.corpus_size if self.corpus_size else 0.0
        self._average_idf: float | None = None

    # The IDF is computed for the terms a query asks for, not the whole vocabulary on every change (a long save's
    # vocabulary grows with it); only the floor of a negative IDF needs the mean over every term, when one occurs,
    # computed from how many terms have each document frequency (a build and an update give the same counts, so
    # the same mean to the bit).

    def _raw_idf(self, df) -> np.ndarray:
        return np.log(self.corpus_size - df + 0.5) - np.log(df + 0.5)

    @property
    def average_idf(self) -> float:
        if self._average_idf is None:
            frequencies = np.flatnonzero(self.df_counts[1:]) + 1
            terms = self.df_counts[frequencies]
            total = int(terms.sum())
            self._average_idf = (
                float((self._raw_idf(frequencies.astype(np.float64)) * terms).sum()) / total if total else 0.0
            )
        return self._average_idf

    def term_idf(self, term_id: int) -> float:
        """BM25Okapi's IDF of one term (its epsilon floor for a term in more than half the documents)."""
        value = self._raw_idf(np.asarray([self.df[term_id]], dtype=np.float64))[0]
        return self.epsilon * self.average_idf if value < 0 else value

    @property
    def idf(self) -> np.ndarray:
        """Every term's IDF (0 for a term no document holds)."""
        present = self.df > 0
        idf = np.zeros(len(self.df))
        idf[present] = self._raw_idf(self.df[present].astype(np.float64))
        return np.where(idf < 0, self.epsilon * self.average_idf, idf)

    @classmethod
    def build(cls, vocab: dict[str, int], base, indptr, members, n_targets: int, *, k1: float, b: float) -> ViewIndex:
        """Build the index of documents 0..n_targets-1 (each the union of its members' terms)."""
        segments, doc_len = _layout(base, indptr, members, 0, n_targets, [])
        df = np.zeros(len(vocab), dtype=np.int64)
        for segment in segments:
            df[segment.terms] += segment.df
        return cls(vocab, doc_len, segments, df, k1=k1, b=b)

    def updated(self, vocab: dict[str, int], base, indptr, members, n_targets: int, first_changed: int) -> ViewIndex:
        """Return the index of documents 0..n_targets-1, where documents before `first_changed` are this index's
        (same members) and the rest are new, changed, or (past `n_targets`) gone: the segments from the one
        holding `first_changed` to the end are rebuilt."""
        keep = [s for s in self.segments if s.end <= first_changed and s.end <= n_targets]
        start = keep[-1].end if keep else 0
        segments, lengths = _layout(base, indptr, members, start, n_targets, keep)
        df = np.zeros(len(vocab), dtype=np.int64)
        df[: len(self.df)] = self.df
        before, after = {id(s) for s in self.segments}, {id(s) for s in segments}
        gone = [s for s in self.segments if id(s) not in after]  # rebuilt, gone, or merged into one of the next level
        new = [s for s in segments if id(s) not in before]
        for segment in gone:
            df[segment.terms] -= segment.df
        for segment in new:
            df[segment.terms] += segment.df
        # The terms whose frequency moved leave their old count and join their new one.
        touched = np.unique(np.concatenate([EMPTY, *(s.terms for s in gone), *(s.terms for s in new)]))
        old_df = np.zeros(len(touched), dtype=np.int64)  # a term new to the vocabulary had none
        known = touched < len(self.df)
        old_df[known] = self.df[touched[known]]
        df_counts = np.zeros(max(len(self.df_counts), int(df[touched].max(initial=0)) + 1), dtype=np.int64)
        df_counts[: len(self.df_counts)] = self.df_counts
        df_counts[0] += max(len(vocab) - len(self.df), 0)
        np.subtract.at(df_counts, old_df, 1)
        np.add.at(df_counts, df[touched], 1)
        doc_len = np.concatenate([self.doc_len_array[:start], lengths]).astype(np.int64, copy=False)
        length_sum = self.length_sum - int(self.doc_len_array[start:].sum()) + int(lengths.sum())
        return ViewIndex(
            vocab,
            doc_len,
            segments,
            df,
            k1=self.k1,
            b=self.b,
            epsilon=self.epsilon,
            df_counts=df_counts,
            length_sum=length_sum,
        )

    def get_scores(self, query) -> np.ndarray:
        score = np.zeros(self.corpus_size)
        for term in query:
            term_id = self.vocab.get(term)
            if term_id is None:
                continue
            parts = [entry for entry in (s.lookup(term_id) for s in self.segments) if entry is not None]
            if not parts:
                continue
            if len(parts) == 1:
                docs, counts = parts[0]
            else:
                docs = np.concatenate([d for d, _ in parts])
                counts = np.concatenate([c for _, c in parts])
            doc_len = self.doc_len_array[docs]
            score[docs] += self.term_idf(term_id) * (
                counts * (self.k1 + 1) / (counts + self.k1 * (1 - self.b + self.b * doc_len / self.avgdl))
            )
        return score

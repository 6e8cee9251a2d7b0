"""A BM25 index in segments: a change rebuilds the segments it touches, never the whole index.

A view's index (views.py: own text, context, turn) holds one document per chunk or turn, in
view order. Its postings are split into segments of consecutive documents: sealed segments of
`SEAL` documents (merged, `MERGE` at a time, into segments of the next level: 512, 4,096,
32,768 documents ...) and an open tail of the last documents, never fewer than `KEEP_OPEN`,
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
SEAL = 512  # documents in a sealed segment of the first level
KEEP_OPEN = 64  # the last documents are never sealed: an append or a short rewind changes only these
MERGE = 8  # sealed segments of one level that merge into one of the next
MAX_LEVEL = 2  # 512 x 8^2 = 32,768 documents: a merge never concatenates more


@dataclass(frozen=True)
class Segment:
    """The postings of documents start..end-1 (term id -> (document ids, counts)) and their document frequencies."""

    start: int
    end: int
    level: int  # -1: the open tail
    postings: dict
    df_terms: np.ndarray
    df_counts: np.ndarray


def pairs(base, indptr: np.ndarray, members: np.ndarray, targets: np.ndarray):
    """Return (target, term id, count) summed over each target's members, and the targets' lengths."""
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


def group_by_term(pair_target, pair_term, pair_count) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    """Return term id -> (targets ascending, counts)."""
    order = np.argsort(pair_term, kind="stable")
    pair_target, pair_term, pair_count = pair_target[order], pair_term[order], pair_count[order]
    if not len(pair_term):
        return {}
    cuts = np.flatnonzero(pair_term[1:] != pair_term[:-1]) + 1
    terms = pair_term[np.concatenate([[0], cuts])].tolist()
    return dict(zip(terms, zip(np.split(pair_target, cuts), np.split(pair_count, cuts))))


def _segment(base, indptr, members, start: int, end: int, level: int) -> tuple[Segment, np.ndarray]:
    """Build the segment of documents start..end-1; return it and their lengths."""
    targets = np.arange(start, end, dtype=np.int64)
    pair_target, pair_term, pair_count, lengths = pairs(base, indptr, members, targets)
    postings = group_by_term(pair_target, pair_term, pair_count)
    terms = np.fromiter(postings, dtype=np.int64, count=len(postings))
    counts = np.fromiter((len(docs) for docs, _counts in postings.values()), dtype=np.int64, count=len(postings))
    return Segment(start, end, level, postings, terms, counts), lengths


def _merged(segments: list[Segment]) -> Segment:
    """One segment of the next level holding the postings of consecutive `segments` (concatenated, in order)."""
    postings: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    for term in {term for segment in segments for term in segment.postings}:
        parts = [segment.postings[term] for segment in segments if term in segment.postings]
        postings[term] = (np.concatenate([docs for docs, _ in parts]), np.concatenate([counts for _, counts in parts]))
    terms = np.fromiter(postings, dtype=np.int64, count=len(postings))
    counts = np.fromiter((len(docs) for docs, _counts in postings.values()), dtype=np.int64, count=len(postings))
    return Segment(segments[0].start, segments[-1].end, segments[0].level + 1, postings, terms, counts)


def _layout(base, indptr, members, start: int, end: int, sealed: list[Segment]) -> tuple[list[Segment], np.ndarray]:
    """Build documents start..end-1 after `sealed`: sealed segments of `SEAL` while more than `KEEP_OPEN` stay
    open, merged a level up `MERGE` at a time, then the open tail. Return every segment and the new lengths."""
    segments, lengths, position = list(sealed), [], start
    while end - position >= SEAL + KEEP_OPEN:
        segment, part = _segment(base, indptr, members, position, position + SEAL, 0)
        segments.append(segment)
        lengths.append(part)
        position += SEAL
        while True:  # a run of MERGE segments of one level at the end becomes one of the next
            run = segments[-MERGE:]
            level = run[-1].level
            if len(run) < MERGE or level >= MAX_LEVEL or any(s.level != level for s in run):
                break
            segments[-MERGE:] = [_merged(run)]
    tail, part = _segment(base, indptr, members, position, end, -1)
    lengths.append(part)
    if end > position:
        segments.append(tail)
    return segments, (np.concatenate(lengths) if lengths else EMPTY)


class ViewIndex:
    """BM25 over documents given as postings per term id, in segments (BM25Okapi's formula and IDF)."""

    def __init__(self, vocab: dict[str, int], doc_len: np.ndarray, segments: list[Segment], df: np.ndarray, *,
                 k1: float, b: float, epsilon: float = 0.25):
        self.vocab, self.doc_len_array, self.segments, self.df = vocab, doc_len, segments, df
        self.k1, self.b, self.epsilon = k1, b, epsilon
        self.corpus_size = len(doc_len)
        self.avgdl = float(doc_len.sum()) / self.corpus_size if self.corpus_size else 0.0
        present = df > 0
        idf = np.zeros(len(df))
        idf[present] = np.log(self.corpus_size - df[present] + 0.5) - np.log(df[present] + 0.5)
        self.average_idf = float(idf[present].mean()) if present.any() else 0.0
        self.idf = np.where(idf < 0, self.epsilon * self.average_idf, idf)

    @classmethod
    def build(cls, vocab: dict[str, int], base, indptr, members, n_targets: int, *, k1: float, b: float) -> ViewIndex:
        """Build the index of documents 0..n_targets-1 (each the union of its members' terms)."""
        segments, doc_len = _layout(base, indptr, members, 0, n_targets, [])
        df = np.zeros(len(vocab), dtype=np.int64)
        for segment in segments:
            np.add.at(df, segment.df_terms, segment.df_counts)
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
        for segment in self.segments:  # rebuilt, gone, or merged into a segment of the next level
            if id(segment) not in after:
                np.subtract.at(df, segment.df_terms, segment.df_counts)
        for segment in segments:
            if id(segment) not in before:
                np.add.at(df, segment.df_terms, segment.df_counts)
        doc_len = np.concatenate([self.doc_len_array[:start], lengths]).astype(np.int64)
        return ViewIndex(vocab, doc_len, segments, df, k1=self.k1, b=self.b, epsilon=self.epsilon)

    def get_scores(self, query) -> np.ndarray:
        score = np.zeros(self.corpus_size)
        for term in query:
            term_id = self.vocab.get(term)
            if term_id is None:
                continue
            parts = [entry for entry in (s.postings.get(term_id) for s in self.segments) if entry is not None]
            if not parts:
                continue
            if len(parts) == 1:
                docs, counts = parts[0]
            else:
                docs = np.concatenate([d for d, _ in parts])
                counts = np.concatenate([c for _, c in parts])
            doc_len = self.doc_len_array[docs]
            score[docs] += self.idf[term_id] * (
                counts * (self.k1 + 1) / (counts + self.k1 * (1 - self.b + self.b * doc_len / self.avgdl))
            )
        return score

"""Lexical (BM25) retrieval arm.

The semantic arm (sentence-transformer embeddings) is good at meaning but can miss an exact
token the player typed: a proper noun ("Kael"), an item name, a coined word, because such
tokens carry little distributed meaning. BM25 is the classic lexical complement: it rewards
rare exact-term overlap. The two arms are fused with Reciprocal Rank Fusion (fusion.py).

Graceful degradation: without rank_bm25 the lexical arm is simply absent and search falls
back to the semantic arm alone (no crash), like VectorMemory without an embedding runtime.

Algorithm reference: Hindsight (MIT) runs BM25 in Postgres (tsvector); that SQL is not
portable, so the idea is reimplemented with the rank_bm25 library over the in-memory corpus
of a save's chunks. `build_bm25` returns a `rank_bm25.BM25Okapi` whose `get_scores` walks
per-term postings with numpy instead of every document's term dictionary: the same
arithmetic in the same order, so the scores are identical, in a fraction of the time.

Indexing terms (`index_terms`) are `tokenize` minus stop words (English and the other
common game languages), with a light English plural/verb-suffix folding on Latin words; see
docs/retrieval.md for what each step bought on the LoCoMo benchmark.
"""

from __future__ import annotations

import functools
import unicodedata
from collections.abc import Iterable

import numpy as np

try:  # the `regex` module knows Unicode scripts and mark categories; `re` does not
    import regex as _re

    _TOKEN = _re.compile(r"[\p{L}\p{N}\p{M}]+")
    _CJK = _re.compile(r"[\p{Han}\p{Hiragana}\p{Katakana}]")
    _CJK_RUN = _re.compile(r"[\p{Han}\p{Hiragana}\p{Katakana}]|[^\p{Han}\p{Hiragana}\p{Katakana}]+")
except ImportError:  # pragma: no cover - regex ships with transformers
    import re as _re

    _TOKEN = _re.compile(r"[^\W_]+")
    _CJK = _re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
    _CJK_RUN = _re.compile(
        r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]|[^\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]+"
    )

try:
    from rank_bm25 import BM25Okapi as _BM25Okapi
except ImportError:  # pragma: no cover - exercised by monkeypatching in tests
    _BM25Okapi = None


def is_available() -> bool:
    """Return True when the BM25 backend (rank_bm25) can be used."""
    return _BM25Okapi is not None


def tokenize(text: str) -> list[str]:
    """Split `text` into lowercased words, deterministically and Unicode-aware.

    Anything that is not a letter, digit or combining mark separates words, so punctuation
    and underscores act as separators. Accented letters and non-Latin scripts are kept
    ("Kaël" is one token, and so is a Devanagari word with its vowel signs); text is
    NFKC-normalised first so a decomposed "e" + diaeresis equals the precomposed letter.
    Chinese and Japanese characters, written without spaces, become one token each (as in
    Lucene's standard analyzer) so that BM25 can still match them.
    """
    if not text:
        return []
    text = unicodedata.normalize("NFKC", text).lower()
    tokens = _TOKEN.findall(text)
    if not _CJK.search(text):
        return tokens
    out: list[str] = []
    for token in tokens:
        if _CJK.search(token):
            out.extend(_CJK_RUN.findall(token))
        else:
            out.append(token)
    return out


# Function words that match almost every chunk: they add noise to BM25 and, worse, let a
# question word ("what", "did") decide rankings. Kept short and per language; content words
# are never listed.
STOP_WORDS: frozenset[str] = frozenset(
    """
    a about above after again against all am an and any are aren as at be because been before
    being below between both but by can cannot could couldn d did didn do does doesn doing don
    down during each few for from further had hadn has hasn have haven having he her here hers
    herself him himself his how i if in into is isn it its itself just ll m me might more most
    must mustn my myself no nor not now o of off on once only or other ought our ours ourselves
    out over own re s same shall shan she should shouldn so some such t than that the their
    theirs them themselves then there these they this those through to too under until up upon
    us ve very was wasn we were weren what when where which while who whom why will with won
    would wouldn y you your yours yourself yourselves also yes yeah oh ok okay hey hi lol
    le la les un une des du de et ou est en au aux ce ces il elle ils elles je tu nous vous on
    que qui dans pour par sur pas ne se sa son ses leur leurs mais avec
    el los las una unos unas del y o es en al lo que por para con se su sus no
    der die das ein eine einer eines und oder ist im zu den dem des mit von nicht sich auf
    il lo gli le uno una di da per con su non che è
    o os as um uma do da dos das em no na nos nas por com que não
    и в во не что он на я с со как а то все она так его но да ты к у же вы за бы по ее мне
    """.split()
)


@functools.lru_cache(maxsize=1 << 16)  # a word folds the same every time: a story's words are folded once
def _fold_english_suffix(token: str) -> str:
    """Fold common English inflections so "paints", "painted" and "painting" meet.

    Only plain ASCII words of four letters or more are touched (short words, names with
    accents and other scripts stay as written); the rules are deliberately few.
    """
    if len(token) < 4 or not token.isascii() or not token.isalpha():
        return token
    if token.endswith("ies") and len(token) > 4:
        token = token[:-3] + "y"
    elif token.endswith(("sses", "xes", "zes", "ches", "shes")):
        token = token[:-2]
    elif token.endswith("s") and not token.endswith(("ss", "us", "is")):
        token = token[:-1]
    elif token.endswith("ing") and len(token) > 5:
        token = _undouble(token[:-3])
    elif token.endswith("eed") and len(token) > 5:
        token = token[:-1]
    elif token.endswith("ed") and len(token) > 4:
        token = token[:-2]
        token = token[:-1] + "y" if token.endswith("i") else _undouble(token)
    if token.endswith("e") and len(token) > 3:
        token = token[:-1]
    return token


def _undouble(stem: str) -> str:
    if len(stem) > 2 and stem[-1] == stem[-2] and stem[-1] not in "lsz":
        return stem[:-1]
    return stem


def index_terms(text: str, *, stop_words: bool = True, fold_inflections: bool = True) -> list[str]:
    """Return the BM25 terms of `text`: its tokens minus stop words, inflections folded.

    The switches exist for measuring what each step buys (bench/retrieval_quality.py).
    """
    tokens = tokenize(text)
    if stop_words:
        tokens = [token for token in tokens if token not in STOP_WORDS]
    if fold_inflections:
        tokens = [_fold_english_suffix(token) for token in tokens]
    return tokens


if _BM25Okapi is not None:

    class PostingsBM25(_BM25Okapi):
        """BM25Okapi whose scoring walks per-term postings instead of every document.

        `rank_bm25.BM25Okapi.get_scores` builds, for each query term, a Python list over
        every document's term dictionary: O(corpus) Python work per term. Here each term
        keeps the numpy arrays of the documents that contain it and their term counts, and
        the per-term contribution is computed with the very same expression, added in the
        same query-term order, so the scores equal BM25Okapi's exactly.
        """

        def __init__(self, corpus: list[list[str]], **kwargs):
            super().__init__(corpus, **kwargs)
            postings: dict[str, tuple[list[int], list[int]]] = {}
            for doc_index, frequencies in enumerate(self.doc_freqs):
                for term, count in frequencies.items():
                    entry = postings.get(term)
                    if entry is None:
                        postings[term] = entry = ([], [])
                    entry[0].append(doc_index)
                    entry[1].append(count)
            self.postings = {
                term: (np.asarray(docs, dtype=np.int64), np.asarray(counts, dtype=np.int64))
                for term, (docs, counts) in postings.items()
            }
            self.doc_len_array = np.asarray(self.doc_len)
            # The per-document dictionaries are what makes the index big; scoring no longer
            # needs them, so they are dropped (get_batch_scores is re-implemented below).
            self.doc_freqs = None

        def _term_weights(self, term: str) -> tuple[np.ndarray, np.ndarray] | None:
            entry = self.postings.get(term)
            if entry is None:
                return None
            docs, q_freq = entry
            doc_len = self.doc_len_array[docs]
            weights = (self.idf.get(term) or 0) * (
                q_freq * (self.k1 + 1) / (q_freq + self.k1 * (1 - self.b + self.b * doc_len / self.avgdl))
            )
            return docs, weights

        def get_scores(self, query: Iterable[str]) -> np.ndarray:
            score = np.zeros(self.corpus_size)
            for term in query:
                found = self._term_weights(term)
                if found is not None:
                    docs, weights = found
                    score[docs] += weights
            return score

        def get_batch_scores(self, query: Iterable[str], doc_ids: list[int]) -> list[float]:
            return self.get_scores(query)[np.asarray(doc_ids, dtype=np.int64)].tolist()

else:  # pragma: no cover
    PostingsBM25 = None


class AggregatedBM25:
    """BM25 over documents that are unions of base documents, built from base postings.

    A chunk read with its neighbours, or a whole turn, is a "document" whose term counts
    are the sums of its members' counts. Concatenating the members' terms and building
    BM25Okapi again would re-count every term in Python (seconds on a large save); this
    expands the base postings through the membership map with numpy instead. Same
    formula, IDF and epsilon floor as rank_bm25.BM25Okapi (tested equal), same
    `get_scores(query_terms)` interface.

    `members_of_target` is given in CSR form over base documents: base document d counts
    towards targets[indptr[d]:indptr[d + 1]].
    """

    def __init__(
        self,
        base: "PostingsBM25",
        indptr: np.ndarray,
        targets: np.ndarray,
        n_targets: int,
        k1: float = 1.5,
        b: float = 0.75,
        epsilon: float = 0.25,
    ):
        self.k1, self.b, self.epsilon = k1, b, epsilon
        self.corpus_size = int(n_targets)
        fanout = np.diff(indptr)
        # Target document lengths: each base length counted once per target it feeds.
        self.doc_len_array = np.bincount(
            targets, weights=np.repeat(base.doc_len_array, fanout), minlength=n_targets
        ).astype(np.int64)
        self.avgdl = float(self.doc_len_array.sum()) / self.corpus_size
        terms = list(base.postings)
        if not terms:
            self.postings, self.idf = {}, {}
            return
        term_index = np.concatenate([np.full(len(base.postings[t][0]), i, dtype=np.int64) for i, t in enumerate(terms)])
        base_docs = np.concatenate([base.postings[t][0] for t in terms])
        counts = np.concatenate([base.postings[t][1] for t in terms])
        lengths = fanout[base_docs]
        starts = np.repeat(indptr[base_docs], lengths)
        offsets = np.arange(lengths.sum()) - np.repeat(np.cumsum(lengths) - lengths, lengths)
        expanded_targets = targets[starts + offsets]
        expanded_terms = np.repeat(term_index, lengths)
        expanded_counts = np.repeat(counts, lengths)
        order = np.lexsort((expanded_targets, expanded_terms))
        expanded_terms, expanded_targets, expanded_counts = (
            expanded_terms[order],
            expanded_targets[order],
            expanded_counts[order],
        )
        new_pair = np.ones(len(order), dtype=bool)
        new_pair[1:] = (expanded_terms[1:] != expanded_terms[:-1]) | (expanded_targets[1:] != expanded_targets[:-1])
        pair_starts = np.flatnonzero(new_pair)
        pair_terms = expanded_terms[pair_starts]
        pair_targets = expanded_targets[pair_starts]
        pair_counts = np.add.reduceat(expanded_counts, pair_starts)
        term_bounds = np.searchsorted(pair_terms, np.arange(len(terms) + 1))
        cuts = term_bounds[1:-1]
        self.postings = dict(zip(terms, zip(np.split(pair_targets, cuts), np.split(pair_counts, cuts))))
        freq = np.diff(term_bounds).astype(np.float64)
        idf = np.log(self.corpus_size - freq + 0.5) - np.log(freq + 0.5)
        self.average_idf = float(idf.mean())
        idf = np.where(idf < 0, self.epsilon * self.average_idf, idf)
        self.idf = dict(zip(terms, idf.tolist()))

    def get_scores(self, query: Iterable[str]) -> np.ndarray:
        score = np.zeros(self.corpus_size)
        for term in query:
            entry = self.postings.get(term)
            if entry is None:
                continue
            docs, q_freq = entry
            doc_len = self.doc_len_array[docs]
            score[docs] += (self.idf.get(term) or 0) * (
                q_freq * (self.k1 + 1) / (q_freq + self.k1 * (1 - self.b + self.b * doc_len / self.avgdl))
            )
        return score


def build_bm25(corpus_texts: list[str]):
    """Build a BM25 index over `corpus_texts`, or return None when BM25 is unavailable.

    Split out from `rank_by_bm25` so callers can cache the index while the corpus is
    unchanged (building tokenises the whole corpus and computes IDF, the expensive part)
    and score many queries against it cheaply. An empty corpus has no index (None).
    """
    if not is_available() or not corpus_texts:
        return None
    return PostingsBM25([index_terms(text) for text in corpus_texts])


# A long score array's n-th largest is looked for first among every SAMPLE_STEP-th score (`nth_largest`).
SAMPLE_FROM = 4096
SAMPLE_STEP = 16


def nth_largest(values: np.ndarray, n: int) -> float:
    """Return the n-th largest of `values` (finite; 0 < n < len(values)), as a partition of all of them gives it.

    A story's common words (its characters' names) score most of a long save's documents, and selecting among
    all of them grew with the save (0.8 ms at 100,000 scores, twice a search). For a long array and a small n,
    a strided sample's (n / step + 4)-th largest is a guess below the n-th largest: the scores at or above the
    guess, when at least n, hold the n largest, and the n-th largest among them is the answer, exactly
    (~0.1 ms). When fewer are (a guess too high, by chance or an adversarial order), all scores are searched.
    """
    count = len(values)
    if count >= SAMPLE_FROM and n * 4 * SAMPLE_STEP <= count:
        sample = values[::SAMPLE_STEP]
        k = n // SAMPLE_STEP + 4
        guess = np.partition(sample, len(sample) - k)[len(sample) - k]
        above = values[values >= guess]
        if len(above) >= n:
            return np.partition(above, len(above) - n)[len(above) - n]
    return np.partition(values, count - n)[count - n]


def ranked_indices(scores: np.ndarray, top_n: int | None) -> np.ndarray:
    """Return indices of non-zero scores, best first, ties in input order (`top_n`: the best n)."""
    # `!= 0` first: numpy finds the set entries of a boolean array several times faster than of a float one
    # (0.05 against 0.3 ms at 100,000 documents), the same indices.
    nonzero = np.flatnonzero(scores != 0)
    if nonzero.size == 0:
        return nonzero
    values = scores[nonzero]
    if top_n is not None and 0 < top_n < nonzero.size:
        # Keep every document tied with the n-th score so the stable sort still decides ties.
        threshold = nth_largest(values, top_n)
        keep = values >= threshold
        nonzero, values = nonzero[keep], values[keep]
    order = np.argsort(-values, kind="stable")
    ranked = nonzero[order]
    if top_n is not None and top_n > 0:
        ranked = ranked[:top_n]
    return ranked


def score_with_bm25(bm25, query_text: str) -> np.ndarray | None:
    """Return the BM25 score of every indexed document for `query_text` (None: no signal)."""
    if bm25 is None:
        return None
    terms = index_terms(query_text)
    if not terms:
        return None
    return bm25.get_scores(terms)


def rank_with_bm25(bm25, query_text: str, corpus_ids: list[str], top_n: int | None = None) -> list[str]:
    """Rank `corpus_ids` against a pre-built `bm25` index, best first.

    `corpus_ids` are aligned 1:1 with the texts the index was built from. Return an empty
    list when the index is None or the query has no usable tokens; drop zero-score
    documents (no lexical signal). Ties keep input order. `top_n` (optional) returns only
    the best n, without sorting the whole corpus.
    """
    scores = score_with_bm25(bm25, query_text)
    if scores is None:
        return []
    return [corpus_ids[i] for i in ranked_indices(scores, top_n)]


def rank_by_bm25(query_text: str, corpus_ids: list[str], corpus_texts: list[str]) -> list[str]:
    """Rank `corpus_ids` by BM25 relevance to `query_text`, best first.

    Convenience wrapper that builds a one-shot index, then scores; hot paths with a stable
    corpus cache `build_bm25()` and call `rank_with_bm25()`. Return the ids by descending
    score, without zero-score documents; an empty list when BM25 is unavailable or the
    query has no usable tokens. Ties keep the input order.
    """
    if len(corpus_ids) != len(corpus_texts):
        raise ValueError("corpus_ids and corpus_texts must be aligned 1:1")
    if not index_terms(query_text):
        return []
    return rank_with_bm25(build_bm25(corpus_texts), query_text, corpus_ids)

"""More memories per token: lower-ranked narrative chunks represented by what the action asks about.

When the recalled narrative chunks, taken whole, are more than the budget holds (the
assembly left one out), the allocator (studio/memory/recall/allocate.py) gives the
best `keep_whole` chunks (the narrative search's `k_narrative`, 6 by default) in full and
represents each chunk ranked below them by its *focus excerpt*: the sentence(s) of the chunk
that share the most of the action's words, with the sentence after each, the rest replaced
by "[…]" (the mark `fit.mark_piece` already uses for a window of a longer turn), then
assembles again, so more distinct memories fit the same tokens. Nothing is excerpted when
every chunk fits whole.

Rules (the issue's "a chunk either fits whole or is left out, or is cut with its cut
marked"):
- A chunk is split into segments at sentence ends outside brackets; what follows the last
  sentence end (a trailing "[shares a photo: …]", a sentence without its full stop) is a
  segment of its own. No segment is ever cut inside.
- A leading speaker label ("Caroline: ", at most four words before a colon) is kept, so the
  excerpt still says who spoke; it is not scored. A chunk that is a window of a longer turn
  (it starts with "[…]") has none.
- Relevance is lexical and deterministic: each of the action's BM25 terms
  (`retrieval.lexical.index_terms`: stop words out, inflections folded) weighs
  log(1 + n / df), n the recalled chunks offered, df those holding the term (a name every
  chunk holds counts little); a segment scores the weights of the distinct terms it holds.
  The segments with the best score are kept, each with the `following` segment(s) after it
  (`ContextPolicy.excerpt_following`; a sentence window: the words of a question often sit
  one sentence before its answer, "We always look forward to our family camping trip. We
  roast marshmallows, …"); when that keeps more than `max_kept_fraction`
  (`ContextPolicy.excerpt_max_kept_fraction`, two thirds) of the chunk's tokens, the best
  segments alone.
- A chunk stays whole when no segment shares a word with the action (no signal which part
  matters), when it has one segment, or when even the best segments alone keep more than
  `max_kept_fraction` of its tokens (too little saved for what it loses).
- The item says so: `why["excerpt"]` (its tokens whole and excerpted, which segments of how
  many were kept, the terms that chose them) and its reason ends with
  "— excerpted for this action: …"; `ref` still names the chunk and its turn.

Measured (bench/excerpt_latency.py, LoCoMo 26 and 30, 1,500 tokens, chunks dated by their
story-time heading): ~38 narrative items a context, ~15 of them excerpts saving ~310 tokens
(~24 chunks whole without excerpts); the excerpt step adds a p50 of ~13-18 ms to a context
(no model call; the embedder, considered as the relevance signal, takes ~0.4 s to encode 160
such sentences, a context's worth, on this 2-core machine). Of the evidence utterances that
reach the narrator as excerpts, 2 in 44 lost every word of the answer that the whole
utterance held (with the best sentence alone, without the one after: 8 in 37).
"""

from __future__ import annotations

import functools
import math
import re
from dataclasses import dataclass

from studio.memory.embeddings.tokens import count_tokens
from studio.memory.recall.policy import DEFAULT_POLICY
from studio.memory.retrieval.lexical import index_terms

CUT_MARK = "[…]"
_SENTENCE_END = re.compile(r"[.!?…][\"'”’)\]]*(?=\s|$)")
_SPEAKER = re.compile(r"^((?:[^\s:\[\]()]+ ){0,3}[^\s:\[\]()]+): ")
_TURN_PREFIX = re.compile(r"^(\(turn \d+\) )")


@dataclass(frozen=True)
class Excerpt:
    text: str
    kept: tuple[int, ...]  # 1-based indexes of the segments kept
    segments: int
    terms: tuple[str, ...]  # the action's terms the kept segments hold


def segments_of(text: str) -> list[str]:
    """Return `text`'s segments: its sentences (ends outside brackets) and what follows the last end."""
    out, start = [], 0
    for match in _SENTENCE_END.finditer(text):
        head = text[: match.end()]
        if head.count("[") > head.count("]") or head.count("(") > head.count(")"):
            continue  # inside a bracket ("[shares a photo: a sign. It reads …]"): not a sentence end
        piece = text[start : match.end()].strip()
        if piece:
            out.append(piece)
        start = match.end()
    rest = text[start:].strip()
    if rest:
        out.append(rest)
    return out


@functools.lru_cache(maxsize=4096)  # a request's candidates are mostly the last request's: each text read once
def _term_set(text: str) -> frozenset[str]:
    return frozenset(index_terms(text))


def term_weights(query_text: str, texts: list[str]) -> dict[str, float]:
    """Return {term: weight} for the action's BM25 terms: log(1 + n / df) over `texts` (terms no text holds left out)."""
    terms = set(index_terms(query_text))
    if not terms or not texts:
        return {}
    holding = [_term_set(text) & terms for text in texts]
    n = len(texts)
    weights = {}
    for term in sorted(terms):
        df = sum(term in held for held in holding)
        if df:
            weights[term] = math.log(1 + n / df)
    return weights


def focus_excerpt(
    text: str,
    weights: dict[str, float],
    *,
    max_kept_fraction: float = DEFAULT_POLICY.excerpt_max_kept_fraction,
    following: int = DEFAULT_POLICY.excerpt_following,
) -> Excerpt | None:
    """Return the excerpt of `text` that the action's terms choose, or None when it stays whole (module docstring)."""
    prefix = ""
    match = _TURN_PREFIX.match(text)
    if match:
        prefix, text = match.group(1), text[match.end() :]
    head_cut = text.startswith(CUT_MARK + " ")
    tail_cut = text.endswith(" " + CUT_MARK)
    body = text[len(CUT_MARK) + 1 if head_cut else 0 : len(text) - (len(CUT_MARK) + 1) if tail_cut else len(text)]
    speaker = ""
    match = None if head_cut else _SPEAKER.match(body)  # a window of a turn starts mid-text, not with a speaker
    if match:
        speaker, body = match.group(0), body[match.end() :]
    parts = segments_of(body)
    if len(parts) < 2 or not weights:
        return None
    held = [_term_set(part) & weights.keys() for part in parts]
    scores = [sum(weights[t] for t in terms) for terms in held]
    best = max(scores)
    if best <= 0:
        return None
    best_ones = [i for i, score in enumerate(scores) if score == best]
    terms = tuple(sorted({t for i in best_ones for t in held[i]}))
    whole = count_tokens(prefix + text)
    # Each best sentence with the one after it (a sentence window: what the action's words
    # point at is often said next, "We always look forward to our camping trip. We roast
    # marshmallows, …"), else alone when the window saves too little.
    for after in dict.fromkeys((following, 0)):
        kept = sorted({j for i in best_ones for j in range(i, min(i + 1 + after, len(parts)))})
        excerpt = prefix + speaker + _joined(parts, kept, head_cut=head_cut, tail_cut=tail_cut)
        if count_tokens(excerpt) <= max_kept_fraction * whole:
            return Excerpt(text=excerpt, kept=tuple(i + 1 for i in kept), segments=len(parts), terms=terms)
    return None


def _joined(parts: list[str], kept: list[int], *, head_cut: bool, tail_cut: bool) -> str:
    """Return the kept segments in order, "[…]" wherever text is left out (or was already cut)."""
    pieces, previous = [], -1
    for index in kept:
        if index != previous + 1 or (index == 0 and head_cut):
            pieces.append(CUT_MARK)
        pieces.append(parts[index])
        previous = index
    if previous != len(parts) - 1 or tail_cut:
        pieces.append(CUT_MARK)
    return " ".join(pieces)


def excerpt_items(
    items: list,
    *,
    query_text: str,
    keep_whole: int,
    max_kept_fraction: float = DEFAULT_POLICY.excerpt_max_kept_fraction,
    following: int = DEFAULT_POLICY.excerpt_following,
) -> int:
    """Represent every narrative chunk of `items` after the first `keep_whole` by its focus excerpt, in place.

    `items`: the recalled narrative chunks in the order the budget is offered them (best
    first). The weights count over all of them. Return how many were excerpted.
    """
    weights = term_weights(query_text, [item.text for item in items])
    done = 0
    for item in items[keep_whole:]:
        if item.why.get("excerpt"):
            continue
        excerpt = focus_excerpt(item.text, weights, max_kept_fraction=max_kept_fraction, following=following)
        if excerpt is None:
            continue
        whole = item.tokens
        item.text, item.tokens = excerpt.text, count_tokens(excerpt.text)
        which = ", ".join(str(i) for i in excerpt.kept)
        item.why["excerpt"] = {
            "whole_tokens": whole,
            "tokens": item.tokens,
            "segments_kept": list(excerpt.kept),
            "segments": excerpt.segments,
            "terms": list(excerpt.terms),
            "rule": f"ranked below the {keep_whole} chunks kept whole",
        }
        item.reason += (
            f" — excerpted for this action: sentence{'s' if len(excerpt.kept) > 1 else ''} {which} of "
            f"{excerpt.segments}, holding “{', '.join(excerpt.terms)}” ({whole} → {item.tokens} tokens)"
        )
        done += 1
    return done

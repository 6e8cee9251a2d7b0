"""Word and token counts for lore text.

Tokens are the engine's one count (`studio.memory.embeddings.tokens`: the embedding model's WordPiece
tokens, or its documented approximation; `token_method()` says which); words are
whitespace-separated runs.
"""

from __future__ import annotations

import re

from studio.memory.embeddings.tokens import (  # noqa: F401  (re-exported: the lore pages' names)
    APPROXIMATE_METHOD,
    EMBEDDING_MAX_TOKENS,
    TOKENIZER_METHOD,
    count_tokens,
    count_tokens_many,
    token_method,
)

_WORD_RE = re.compile(r"\S+")


def count_words(text: str) -> int:
    """Return the number of whitespace-separated words in `text`."""
    return len(_WORD_RE.findall(text or ""))


def text_counts(text: str) -> tuple[int, int]:
    """Return `(words, tokens)` for `text`."""
    return count_words(text), count_tokens(text)


def text_counts_many(texts: list[str]) -> list[tuple[int, int]]:
    """Return `(words, tokens)` for each text; tokenizes in one batch (imports)."""
    return [(count_words(text), tokens) for text, tokens in zip(texts, count_tokens_many(texts))]

"""Split narrative longer than the embedding model's window into overlapping chunks.

MiniLM reads at most 256 word pieces ([CLS] and [SEP] included) and silently ignores the
rest, so a long turn embedded whole would be searchable by its beginning only. A text whose
word pieces exceed `window` is cut into windows of `window` pieces that overlap by
`overlap` pieces (a sentence cut at one edge is whole in the neighbour), widened to whole
words. Every chunk of a turn carries the turn's id, so rollback and the turn horizon treat
them exactly like a single chunk.
"""

from __future__ import annotations

# 240 content pieces leave room for [CLS]/[SEP] and for widening a window to whole words.
DEFAULT_WINDOW = 240
DEFAULT_OVERLAP = 40


def split_text(
    text: str,
    spans: list[tuple[int, int]],
    window: int = DEFAULT_WINDOW,
    overlap: int = DEFAULT_OVERLAP,
) -> list[str]:
    """Return `text` cut into overlapping chunks of at most about `window` word pieces.

    `spans` are the character spans of the text's word pieces, in order (from the model's
    tokenizer). Text that fits in one window is returned whole, as the only chunk.
    """
    if window <= 0 or overlap < 0 or overlap >= window:
        raise ValueError("need window > overlap >= 0")
    if len(spans) <= window:
        return [text]
    chunks: list[str] = []
    step = window - overlap
    start = 0
    while True:
        end = min(start + window, len(spans))
        char_start = _word_start(text, spans[start][0])
        char_end = _word_end(text, spans[end - 1][1])
        piece = text[char_start:char_end].strip()
        if piece:
            chunks.append(piece)
        if end >= len(spans):
            break
        start += step
    return chunks


def _word_start(text: str, position: int) -> int:
    while position > 0 and not text[position - 1].isspace():
        position -= 1
    return position


def _word_end(text: str, position: int) -> int:
    while position < len(text) and not text[position].isspace():
        position += 1
    return position


def whitespace_spans(text: str) -> list[tuple[int, int]]:
    """Return word spans split on whitespace (a stand-in tokenizer for tests and tools)."""
    spans = []
    position = 0
    for word in text.split():
        start = text.index(word, position)
        spans.append((start, start + len(word)))
        position = start + len(word)
    return spans

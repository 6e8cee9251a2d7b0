"""Nothing twice, nothing oversized: the rules that shape items before the budget decides.

- `mark_piece`: a narrative chunk that is a window of a longer turn (the embedder stores a
  long narrative as overlapping pieces) is shown as it is, with "[…]" where the turn goes
  on; a chunk that is the whole turn is shown whole. No chunk is trimmed to a sentence end
  (that dropped LoCoMo's "[shares a photo: …]" captions, 94 evidence utterances).
- `fit_to_share`: an entry (an item whose policy is `shortenable`: lore, mental models,
  beliefs, facts) longer than what it may take whole (its share or `max_item_percent` of the
  budget; a protected entry, named in the input or in focus, only the whole budget:
  `allocate.item_cap`) is represented, not dropped and not allowed to crowd the rest out: a
  lore entry found by meaning by the passage the search found (the stored chunk), marked as a
  passage; any other entry by its leading whole sentences within the share, the cut marked with
  how much was left out. Narrative chunks and story items are never shortened here: they fit
  whole or are left out.
"""

from __future__ import annotations

import re

from studio.memory.embeddings.tokens import count_tokens

_SENTENCE_END = re.compile(r"[.!?…][\"'”’)\]]*(?=\s|$)")


def mark_piece(chunk: str, full: str | None) -> str:
    """Return `chunk` with "[…]" where `full` (its turn's whole narrative) continues beyond it."""
    chunk, whole = (chunk or "").strip(), (full or "").strip()
    if not whole or chunk == whole or chunk not in whole:
        return chunk
    head = "" if whole.startswith(chunk) else "[…] "
    tail = "" if whole.endswith(chunk) else " […]"
    return head + chunk + tail


def leading_sentences(text: str, tokens: int) -> str:
    """Return the longest run of `text`'s leading whole sentences within `tokens` ("" if none fits)."""
    best = ""
    for match in _SENTENCE_END.finditer(text):
        candidate = text[: match.end()]
        if count_tokens(candidate) > tokens:
            break
        best = candidate
    return best


def fit_to_share(item, *, cap: int) -> None:
    """Shorten the entry `item` in place to within `cap` tokens when it is longer (the caller chose a shortenable one)."""
    if item.tokens <= cap:
        return
    passage = item.why.get("passage")
    title = item.why.get("title")
    original = item.tokens
    if passage and count_tokens(passage) + 20 <= cap:
        text = (
            f"{title}: " if title else ""
        ) + f"[passage found for this action] {passage.strip()} [… rest of the entry left out]"
        how = "its passage found for this action"
    else:
        marker = " [… cut: the rest of this entry ({n} tokens) is left out]"
        room = max(cap - count_tokens(marker.format(n=original)), 0)
        head = leading_sentences(item.text, room)
        if not head:
            return  # not one whole sentence fits: the budget leaves it out whole
        text = head + marker.format(n=original - count_tokens(head))
        how = "its leading sentences"
    item.text = text
    item.tokens = count_tokens(text)
    item.why["shortened"] = f"{original} tokens, over its share ({cap} tokens): represented by {how}"
    item.reason += f" — shortened to {how} ({original} → {item.tokens} tokens)"

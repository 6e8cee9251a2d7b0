"""One token counter (`studio.memory.embeddings.tokens`) for lore counts, the context budget and activation."""

from __future__ import annotations

from types import SimpleNamespace

from studio.memory.embeddings import tokens
from studio.memory.recall import context
from studio.memory.lore_activation import spec_from_entry
from studio.memory.embeddings import counting


def test_lore_counts_and_the_memory_context_use_the_same_counter():
    assert counting.count_tokens is tokens.count_tokens
    assert context.count_tokens is tokens.count_tokens
    assert counting.token_method is tokens.token_method


def test_an_entry_without_a_stored_count_is_counted_like_a_stored_one():
    text = "Kaël is a smuggler."  # ka ##el is a smug ##gler . : 7 word pieces, 19 characters
    entry = SimpleNamespace(entry_id="kael", title="Kaël", text=text, keys=["kael"])
    assert spec_from_entry(entry).token_count == tokens.count_tokens(text) == 7


def test_the_approximation_when_the_tokenizer_cannot_load(monkeypatch):
    monkeypatch.setattr(tokens, "_tokenizer", lambda: None)
    assert tokens.token_method() == tokens.APPROXIMATE_METHOD
    assert tokens.count_tokens("Kaël owes Mira ten crowns.") == 6
    assert tokens.count_tokens_many(["a b", "", "c."]) == [2, 0, 2]
    assert counting.text_counts_many(["a b", ""]) == [(2, 2), (0, 0)]

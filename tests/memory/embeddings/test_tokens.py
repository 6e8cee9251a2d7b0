"""One token counter (`studio.memory.embeddings.tokens`) for lore counts, the context budget and activation."""

from __future__ import annotations

from types import SimpleNamespace

from hypothesis import given, settings
from hypothesis import strategies as st

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


# Text with what could make pieces interact: spaces of every kind, control characters, combining marks, CJK,
# case with context (final sigma, dotted I), punctuation, words past WordPiece's 100 characters.
_PIECES = st.one_of(
    st.text(max_size=12),
    st.sampled_from(["Σ", "ΑΣ", "İ", "ß", "e\u0301", "\u0301", "中文", "\x00", "\x1c", "\u00a0", "\u3000", "\t", "\n"]),
    st.sampled_from(["Kaël", "smuggler's", "ledger.", "—", "...", "[UNK]", "##ing", "x" * 101]),
)


@settings(max_examples=400, deadline=None)
@given(st.lists(_PIECES, max_size=12), st.lists(st.sampled_from([" ", "  ", "\u00a0", "\n", ""]), max_size=12))
def test_a_text_counts_as_the_tokenizer_counts_it(pieces, gaps):
    """The count adds up the pieces between spaces (`_count_pieces`): exact, against the tokenizer itself."""
    tokenizer = tokens._tokenizer()
    text = "".join(piece + (gaps[i] if i < len(gaps) else " ") for i, piece in enumerate(pieces))
    expected = len(tokenizer.encode(text, add_special_tokens=False).ids)
    assert tokens._count.__wrapped__(text, False) == expected
    assert tokens.count_tokens_many([text, text + " " + text]) == [
        expected,
        len(tokenizer.encode(text + " " + text, add_special_tokens=False).ids),
    ]


def test_the_piece_table_is_bounded(monkeypatch):
    monkeypatch.setattr(tokens, "PIECE_CACHE_SIZE", 4)
    monkeypatch.setattr(tokens, "_piece_counts", {})
    text = "one two three four five six"
    assert tokens.count_tokens_many([text]) == [len(tokens._tokenizer().encode(text, add_special_tokens=False).ids)]
    assert len(tokens._piece_counts) == 0  # six new pieces: counted, not kept
    assert tokens.count_tokens_many(["one two", "three"]) == [2, 1]
    assert tokens.count_tokens_many(["four five"]) == [2] and len(tokens._piece_counts) <= 4


def test_learned_pieces_are_counted_without_the_tokenizer(monkeypatch):
    """`learn_pieces` tokenizes a batch of texts' new pieces once; counting the texts then asks the tokenizer
    nothing, and gives the tokenizer's own counts."""
    monkeypatch.setattr(tokens, "_piece_counts", {})
    tokenizer = tokens._tokenizer()
    texts = ["Kaël rowed past the quayside-lanterns, unhurried.", "(turn 12) Mira's ledger — seventeen débts."]
    expected = [len(tokenizer.encode(text, add_special_tokens=False).ids) for text in texts]
    tokens.learn_pieces(texts + ["", None])
    assert set(tokens._piece_counts) == {piece for text in texts for piece in text.split(" ") if piece}

    class NoTokenizer:
        def __getattr__(self, name):
            raise AssertionError(f"the tokenizer was asked ({name}) for a learned piece")

    assert tokens._count_pieces(texts, NoTokenizer()) == expected


def test_few_new_pieces_are_encoded_one_by_one_and_many_in_a_batch():
    tokenizer = tokens._tokenizer()
    calls = []

    class Spy:
        def encode(self, piece, **kwargs):
            calls.append("encode")
            return tokenizer.encode(piece, **kwargs)

        def encode_batch(self, pieces, **kwargs):
            calls.append("batch")
            return tokenizer.encode_batch(pieces, **kwargs)

    few = ["quayside", "unhurried,"]
    many = [f"word{i}x" for i in range(tokens.BATCH_FROM)]
    assert tokens._encode_pieces(few, Spy()) == [len(tokenizer.encode(p, add_special_tokens=False).ids) for p in few]
    assert calls == ["encode", "encode"]
    calls.clear()
    assert tokens._encode_pieces(many, Spy()) == [len(tokenizer.encode(p, add_special_tokens=False).ids) for p in many]
    assert calls == ["batch"]

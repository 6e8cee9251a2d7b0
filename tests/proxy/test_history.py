"""Reading a front end's messages as turns, and placing the memory block (no database)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from studio.proxy.binding import BindingError, binding_for, model_name
from studio.proxy.history import MARKER, InvalidMessages, inject, read_chat


def m(role, content, **extra):
    return {"role": role, "content": content, **extra}


def test_system_messages_greeting_and_examples_are_not_turns():
    chat = read_chat(
        [
            m("system", "card"),
            m("system", "ex", name="example_user"),
            m("assistant", "Hello, traveller."),
            m("user", " I sit. "),
            m("system", "[author's note]"),
            m("assistant", "She nods."),
            m("user", "I pay."),
            m("system", "[post-history]"),
        ]
    )
    assert chat.greeting == "Hello, traveller."
    assert chat.turns == [("I sit.", "She nods.")]
    assert chat.pending_input == "I pay." and chat.records_answer


def test_consecutive_messages_of_one_role_are_one_and_parts_count_by_text():
    chat = read_chat(
        [
            m("user", "I sit."),
            m("user", [{"type": "image_url", "image_url": {"url": "x"}}, {"type": "text", "text": "Look."}]),
            m("assistant", "A"),
            m("tool", "ignored"),
            m("assistant", "B"),
            m("user", "Go."),
        ]
    )
    assert chat.turns == [("I sit.\n\nLook.", "A\n\nB")]


def test_an_answer_after_the_last_user_message_is_a_continue_or_an_impersonation():
    chat = read_chat([m("user", "I sit."), m("assistant", "She"), m("system", "[Continue]")])
    assert chat.turns == [] and chat.pending_input == "I sit." and chat.trailing_answer == "She"
    assert not chat.records_answer


@pytest.mark.parametrize("messages", [None, [], "hi", [{"content": "x"}], [{"role": "user", "content": 3}]])
def test_bad_messages_are_refused(messages):
    with pytest.raises(InvalidMessages):
        read_chat(messages)


def test_the_block_goes_at_the_first_marker_and_other_markers_vanish():
    messages = [m("system", f"Rules. {MARKER} End."), m("user", f"x {MARKER}")]
    out, placed = inject(messages, "MEM")
    assert placed == "marker" and out[0]["content"] == "Rules. MEM End." and out[1]["content"] == "x "
    assert messages[0]["content"] == f"Rules. {MARKER} End."  # the request itself is not changed


def test_without_a_marker_the_block_follows_the_leading_system_messages():
    out, placed = inject([m("system", "a"), m("developer", "b"), m("user", "c"), m("system", "d")], "MEM")
    assert placed == "after_system" and [x["content"] for x in out] == ["a", "b", "MEM", "c", "d"]
    out, placed = inject([m("user", "c")], "MEM")
    assert placed == "start" and out[0] == {"role": "system", "content": "MEM"}
    assert inject([m("user", "c")], "") == ([m("user", "c")], "none")


def test_the_note_follows_the_chats_last_message_and_the_block_stays_put():
    chat = [
        m("system", "main"),
        m("assistant", "hello"),
        m("user", "u1"),
        m("assistant", "a1"),
        m("user", "u2"),
        m("system", "post-history"),
    ]
    out, placed = inject(chat, "STABLE", note="NOW")
    assert placed == "after_system+note"
    assert [x["content"] for x in out] == ["main", "STABLE", "hello", "u1", "a1", "u2", "NOW", "post-history"]
    # The next request keeps everything up to the chat's newest message: a prefix cache reuses it.
    later, _ = inject(chat[:-1] + [m("assistant", "a2"), m("user", "u3"), chat[-1]], "STABLE", note="LATER")
    assert later[:6] == out[:6]
    # A continue: the note goes after the partial answer, before the front end's nudge.
    cont, _ = inject([m("user", "u"), m("assistant", "partial"), m("system", "[Continue]")], "", note="NOW")
    assert [x["content"] for x in cont] == ["u", "partial", "NOW", "[Continue]"]
    # With a marker, the whole memory goes there, the block then the note.
    marked, placed = inject([m("system", f"Rules. {MARKER}"), m("user", "u")], "STABLE", note="NOW")
    assert placed == "marker" and marked[0]["content"] == "Rules. STABLE\n\nNOW" and len(marked) == 2


def test_the_model_name_binds_the_save():
    assert binding_for(model="axiom/abc/meta-llama/Llama-3", header=None).upstream_model == "meta-llama/Llama-3"
    assert binding_for(model="axiom/abc", header="abc").save_id == "abc"
    assert binding_for(model="gpt-4o", header="abc").upstream_model == "gpt-4o"
    assert model_name("abc", "m") == "axiom/abc/m" and model_name("abc") == "axiom/abc"
    for model, header in (("gpt-4o", None), ("axiom/", None), ("axiom/abc/m", "other")):
        with pytest.raises(BindingError):
            binding_for(model=model, header=header)


texts = st.text(alphabet="abc xyz", min_size=1, max_size=8).map(str.strip).filter(bool)


@given(st.lists(st.tuples(texts, texts), max_size=6), texts)
def test_a_chat_written_from_turns_reads_back_as_those_turns(turns, pending):
    messages = [m("system", "card"), m("assistant", "greeting")]
    for player_input, answer in turns:
        messages += [m("user", player_input), m("system", "note"), m("assistant", answer)]
    chat = read_chat(messages + [m("user", pending)])
    assert chat.turns == turns and chat.pending_input == pending

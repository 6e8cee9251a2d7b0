"""Narrator snapshots as deltas (`saves/narrator/snapshots.py`): exact, bounded, and small when
the prompt extends the one before or a window of it slides along."""

from __future__ import annotations

import json
import os

import pytest
from hypothesis import given
from hypothesis import strategies as st

from studio.saves import portable
from studio.saves.models import NarratorSnapshot
from studio.saves.narrator.snapshots import (
    MAX_LITERAL,
    _common,
    delta_decode,
    delta_encode,
    delta_problem,
    snapshot_create,
    snapshot_prompts,
)

pieces = st.text(st.characters(exclude_categories=("Cs",), exclude_characters="\x00"), min_size=0, max_size=80)


@st.composite
def edited(draw):
    """A reference and a text made of spans of it, reordered, with text inserted between them."""
    reference = "".join(draw(st.lists(pieces, max_size=12)))
    parts = []
    for _ in range(draw(st.integers(0, 6))):
        if reference and draw(st.booleans()):
            start = draw(st.integers(0, len(reference) - 1))
            parts.append(reference[start : start + draw(st.integers(1, 200))])
        else:
            parts.append(draw(pieces))
    return reference, "".join(parts)


@given(case=edited())
def test_a_delta_rebuilds_its_text_exactly(case):
    reference, text = case
    ops = delta_encode(text, reference)
    assert delta_decode(ops, reference) == text
    assert delta_problem(ops, len(reference)) == ""
    assert all(len(op) <= MAX_LITERAL for op in ops if isinstance(op, str))


@given(shared=st.integers(0, 9000), a_tail=pieces, b_tail=pieces, i=st.integers(0, 5), j=st.integers(0, 5))
def test_the_common_run_is_the_common_prefix_at_any_length(shared, a_tail, b_tail, i, j):
    """`_common` compares growing pieces: the same count as a plain common prefix, short runs and runs past 4,096."""
    run = "".join(chr(97 + (n * 7919) % 23) for n in range(shared))
    a, b = "x" * i + run + a_tail, "yy" * j + run + b_tail
    expected = len(os.path.commonprefix([a[i:], b[2 * j :]]))
    assert _common(a, i, b, 2 * j) == expected


def test_a_prompt_that_extends_the_last_one_is_a_copy_and_the_new_part():
    chat = "".join(f"[user]\nMessage {n} about the harbour and its ledgers.\n\n" for n in range(400))
    new = "[assistant]\nThe tide turns at last.\n\n[user]\nI leave."
    ops = delta_encode(chat + new, chat)
    assert ops == [[0, len(chat)], new]
    window = chat[3000:] + new  # the front end dropped the oldest messages
    assert delta_encode(window, chat) == [[3000, len(chat) - 3000], new]
    huge = "é" * (MAX_LITERAL * 2 + 5)
    assert [len(op) for op in delta_encode(huge, "")] == [MAX_LITERAL, MAX_LITERAL, 5]


@pytest.mark.django_db
def test_a_231k_character_system_prompt_exports_and_imports(game_save, universe):
    """A realistic chat's prompt stored a 211,529-character snapshot against a 200,000 limit: its
    export was refused on import. Literals are cut under the limit."""
    system = "The world: " + "harbour lore and its secrets. " * 7_700
    assert len(system) > 231_000
    snapshot_create(game_save_id=game_save.pk, turn_id=1, system_prompt=system, user_prompt="[user]\nHello.")
    snapshot_create(
        game_save_id=game_save.pk,
        turn_id=2,
        system_prompt=system,
        user_prompt="[user]\nHello.\n\n[assistant]\nHi.\n\n[user]\nOn.",
    )
    second = NarratorSnapshot.objects.get(game_save=game_save, turn_id=2)
    assert second.prompt_delta["system"] == [[0, len(system)]] and second.prompt_chars == len(system) + 42
    data = portable.save_export(game_save=game_save).read()
    imported = portable.save_import(universe=universe, data=data).game_save
    assert snapshot_prompts(game_save=imported) == snapshot_prompts(game_save=game_save)
    assert snapshot_prompts(game_save=imported)[1][0] == system
    # A delta that copies past what it copies from is refused, naming it.
    document = json.loads(data)
    document["sections"]["narrator_snapshots"]["items"][1]["prompt_delta"]["user"] = [[0, 10**9]]
    with pytest.raises(portable.SaveFileError, match="prompt_delta"):
        portable.save_import(universe=universe, data=json.dumps(document).encode())

"""Presence per turn: from the state, carried, stopped by a scene change, set by hand, by the extractor."""

from __future__ import annotations

import pytest

from studio.memory.knowledge.models import Presence
from studio.memory.knowledge.presence import presence_from_extractor, presence_set
from studio.world.models import Event
from studio.saves.services import turn_append

pytestmark = pytest.mark.django_db


def rows(save):
    return {p.turn_id: (p.characters, p.source, p.scene) for p in Presence.objects.filter(game_save=save)}


def append(save, state=None, text="..."):
    return turn_append(game_save=save, player_input="go", narrative=text, state=state)


def test_state_present_resolves_names_and_carries_until_the_location_changes(living, no_runner):
    append(living, {"present": ["the captain", "kay", "Stranger"], "location": "harbour"})
    append(living, {})
    append(living, {"location": "harbour"})
    append(living, {"location": "chapel"})
    append(living, {})
    assert rows(living) == {
        1: (["Mira", "Kael", "Stranger"], "state", "harbour"),
        2: (["Mira", "Kael", "Stranger"], "carried", "harbour"),
        3: (["Mira", "Kael", "Stranger"], "carried", "harbour"),
        4: ([], "carried", "chapel"),
        5: ([], "carried", "chapel"),
    }


def test_malformed_present_writes_nothing(living, no_runner):
    with pytest.raises(ValueError, match="present"):
        append(living, {"present": "Mira"})
    living.refresh_from_db()
    assert living.current_turn == 0 and not Event.objects.filter(game_save=living).exists()
    assert not Presence.objects.exists()


def test_playtester_edit_recarries_forward_until_another_source(living, no_runner):
    append(living, {"present": ["Mira"], "location": "harbour"})
    append(living, {})
    append(living, {})
    append(living, {"present": ["Ivo"]})
    append(living, {})
    presence_set(game_save=living, turn_id=2, characters=["Kael"])
    got = rows(living)
    assert got[1][0] == ["Mira"]
    assert got[2] == (["Kael"], "playtester", "harbour")
    assert got[3] == (["Kael"], "carried", "harbour")
    assert got[4] == (["Ivo"], "state", "harbour") and got[5][0] == ["Ivo"]


def test_extractor_never_overrides_state_or_playtester(living, no_runner):
    append(living, {"present": ["Mira"]})
    append(living, {})
    presence_from_extractor(game_save=living, turn_id=1, names=["Kael"])
    presence_from_extractor(game_save=living, turn_id=2, names=["Kael"])
    got = rows(living)
    assert got[1][:2] == (["Mira"], "state") and got[2][:2] == (["Kael"], "extractor")
    presence_set(game_save=living, turn_id=2, characters=["Ivo"])
    presence_from_extractor(game_save=living, turn_id=2, names=["Kael"])
    assert rows(living)[2][:2] == (["Ivo"], "playtester")


def test_presence_set_refuses_a_turn_the_save_does_not_hold(living, no_runner):
    append(living, {})
    with pytest.raises(ValueError, match="does not exist"):
        presence_set(game_save=living, turn_id=5, characters=["Mira"])
    assert not Presence.objects.exists()

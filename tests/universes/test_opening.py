"""Openings for every universe (issue 30): first message, alternate greetings and scenario on the
universe, edited on the Metadata page, carried by Universe-as-Code and the Character Card export,
and what a save opens with; a SillyTavern import starts with recursion on."""

from __future__ import annotations

import json

import pytest
from django.core.exceptions import ValidationError

from studio.saves.narrator import opening
from studio.saves.services import save_create
from studio.universes import services
from studio.universes.interchange import card_export, sillytavern, toml_io
from studio.world.models import UniverseMeta
from studio.universes.opening import opening_from_meta

pytestmark = pytest.mark.django_db

FIRST = "Rain on the quay. {{user}} waits for the ferry."
ALTERNATES = ["The ledger slams shut.", "A bell rings twice across the water."]


def set_opening(universe, **kw):
    values = {
        "first_message": FIRST,
        "alternate_greetings": ALTERNATES,
        "scenario": "Port Vey, the night of the storm.",
    }
    return services.opening_set(universe=universe, **{**values, **kw})


def test_the_opening_form_saves_and_refuses_what_cannot_be_played(author_client, htmx, universe):
    url = f"/universes/{universe.slug}/meta/opening/"
    html = author_client.post(
        url,
        {
            "first_message": FIRST,
            "scenario": "Port Vey.",
            "alternate_greetings": f"{ALTERNATES[0]}\n---\n{ALTERNATES[1]}\n---\n",
        },
        **htmx,
    ).content.decode()
    assert "Saved the opening: the first message and 2 alternate greetings." in html and 'id="opening"' in html
    meta = universe.meta_values()
    assert opening_from_meta(meta).greetings == [FIRST, *ALTERNATES]
    assert json.loads(meta["alternate_greetings"]) == ALTERNATES and meta["scenario"] == "Port Vey."

    html = author_client.post(
        url, {"first_message": "", "alternate_greetings": "Only an alternate."}, **htmx
    ).content.decode()
    assert "Write the first message too" in html
    assert opening_from_meta(universe.meta_values()).first_message == FIRST  # nothing written
    page = author_client.get(f"/universes/{universe.slug}/meta/").content.decode()
    assert FIRST in page  # the form shows the stored first message

    author_client.post(url, {"first_message": "", "alternate_greetings": "", "scenario": ""})
    assert not UniverseMeta.objects.filter(
        universe=universe, key__in=["first_message", "alternate_greetings", "scenario"]
    ).exists()


def test_meta_refuses_alternate_greetings_that_are_not_a_list_of_strings(universe):
    with pytest.raises(ValidationError):
        services.meta_validate(key="alternate_greetings", value='{"a": 1}')
    with pytest.raises(ValidationError):
        services.meta_validate(key="alternate_greetings", value="[1, 2]")
    assert services.meta_validate(key="alternate_greetings", value='["Hello."]') == '["Hello."]'


def test_a_universe_without_a_card_opens_with_its_own_greetings(universe):
    UniverseMeta.objects.create(universe=universe, key="player_character", value="Wren")
    set_opening(universe)
    game_save = save_create(universe=universe, name="Opens")
    assert opening.opening_greetings(game_save=game_save) == [FIRST.replace("{{user}}", "Wren"), *ALTERNATES]
    draft = opening.opening_draft_create(game_save=game_save)
    assert [a.model for a in draft.alternatives.all()] == [opening.OPENING_SOURCE] * 3
    event = opening.opening_accept(game_save=game_save, number=3)
    assert (event.turn_id, event.narrative, event.player_input) == (1, ALTERNATES[1], "")


def test_universe_as_code_carries_the_opening(universe):
    set_opening(universe)
    text = toml_io.export_universe(universe)
    assert "[opening]" in text and "first_message" not in text.split("[opening]")[0]
    document = toml_io.parse_document(text)
    assert document.opening["first_message"] == FIRST
    assert json.loads(document.meta_values()["alternate_greetings"]) == ALTERNATES
    assert "first_message" not in document.extra
    assert toml_io.export_universe(universe) == text  # deterministic

    broken = text.replace('scenario = "Port Vey, the night of the storm."', "scenario = 3")
    with pytest.raises(Exception, match="opening.scenario"):
        toml_io.parse_document(broken)


def test_the_character_card_export_carries_the_opening(universe):
    set_opening(universe)
    card = card_export.export_card(universe, list(universe.lore_entries.all()))
    data = card["data"]
    assert (data["first_mes"], data["alternate_greetings"], data["scenario"]) == (
        FIRST,
        ALTERNATES,
        "Port Vey, the night of the storm.",
    )


def test_a_sillytavern_import_starts_with_recursion_on(author, universe):
    fresh = services.universe_create(user=author, name="Imported")
    world = {"entries": {"0": {"uid": 0, "key": ["Kael"], "content": "Kaël is a smuggler.", "comment": "Kael"}}}
    book = sillytavern.parse_world_info(json.dumps(world).encode())
    report = services.lore_import(universe=fresh, user=author, book=book)
    assert fresh.meta_values()["lore_recursion_depth"] == "3"
    assert any("world_info_recursive" in note for note in report.notes)
    UniverseMeta.objects.create(universe=universe, key="lore_recursion_depth", value="0")
    services.lore_import(universe=universe, user=author, book=sillytavern.parse_world_info(json.dumps(world).encode()))
    assert universe.meta_values()["lore_recursion_depth"] == "0"  # the author's own setting stays

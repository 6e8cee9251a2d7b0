"""`known_by` and secrecy travel in Universe-as-Code TOML, Character Card V3 and SillyTavern
world info (`extensions.axiom.known_by`), round trip; files without it import as before."""

from __future__ import annotations

import json

import pytest

from studio.universes.interchange import card_export, character_card, sillytavern, toml_io
from studio.world.models import LoreEntry
from studio.universes import services

pytestmark = pytest.mark.django_db


def secrets(universe):
    return dict(LoreEntry.objects.filter(universe=universe).values_list("entry_id", "known_by"))


def scramble(universe):
    LoreEntry.objects.filter(universe=universe, entry_id="ledger").update(known_by=None)
    LoreEntry.objects.filter(universe=universe, entry_id="mira").update(known_by=[])


def test_toml_round_trip(cast, author):
    text = toml_io.export_universe(cast)
    assert 'known_by = [\n    "Kael",\n]' in text and 'The Night Watch",\n]' in text
    before = secrets(cast)
    scramble(cast)
    services.universe_import_document(user=author, document=toml_io.parse_document(text), universe=cast)
    assert secrets(cast) == before


def test_world_info_and_card_round_trip_under_extensions(cast, author):
    entries = list(LoreEntry.objects.filter(universe=cast).order_by("entry_id"))
    world = sillytavern.export_world_info(cast, entries)
    axiom = [e["extensions"]["axiom"] for e in world["entries"].values()]
    assert {"entry_id": "ledger", "known_by": ["Kael"]}.items() <= next(
        a for a in axiom if a["entry_id"] == "ledger"
    ).items()
    before = secrets(cast)
    scramble(cast)
    services.lore_import(universe=cast, user=author, book=sillytavern.parse_world_info(json.dumps(world).encode()))
    assert secrets(cast) == before
    card = card_export.export_book(cast, entries)
    scramble(cast)
    services.lore_import(
        universe=cast,
        user=author,
        book=character_card.book_from_card(
            {"spec": "chara_card_v3", "spec_version": "3.0", "data": {"name": "Book", "character_book": card}},
            source="test",
        ),
    )
    assert secrets(cast) == before


def test_a_file_without_known_by_leaves_secrecy_alone(cast, author):
    world = {
        "entries": {
            "0": {
                "uid": 0,
                "key": ["ledger"],
                "content": "New text.",
                "comment": "The Ledger",
                "extensions": {"axiom": {"entry_id": "ledger"}},
            }
        }
    }
    services.lore_import(universe=cast, user=author, book=sillytavern.parse_world_info(json.dumps(world).encode()))
    assert secrets(cast)["ledger"] == ["Kael"]

"""Imports say what they would merge by title and ask; card book entries keep the card's titles and kinds."""

from __future__ import annotations

import json
import re

import pytest

from studio.universes.interchange import character_card
from studio.universes.interchange.card_kinds import card_entry_kind, title_from_key
from studio.universes.models import LoreRevision

pytestmark = pytest.mark.django_db

WORLD = {
    "entries": {
        "0": {"uid": 0, "key": ["Vey"], "comment": "port vey", "content": "The harbour, rebuilt."},
        "1": {"uid": 1, "key": ["bell"], "comment": "The Glass Bell", "content": "It sings."},
    }
}


def upload(name, data):
    from django.core.files.uploadedfile import SimpleUploadedFile

    return SimpleUploadedFile(name, data)


def post(client, universe, data, **extra):
    return client.post(
        f"/universes/{universe.slug}/exchange/import/", {"format": "auto", "default_kind": "concept", **data}, **extra
    )


def test_a_title_merge_is_previewed_and_import_as_new_keeps_both(author_client, htmx, universe):
    response = post(author_client, universe, {"file": upload("world.json", json.dumps(WORLD).encode())}, **htmx)
    html = response.content.decode()
    assert "<html" not in html and 'id="import-panel"' in html
    assert "would merge 1 entry by title" in html and "“port vey”" in html and "<code>port-vey</code>" in html
    assert not LoreRevision.objects.exists() and universe.lore_entries.count() == 2
    token = re.search(r'name="token" value="([^"]+)"', html).group(1)
    response = post(author_client, universe, {"token": token, "filename": "world.json", "titles": "new"}, **htmx)
    assert 'id="import-report"' in response.content.decode()
    assert sorted(universe.lore_entries.values_list("title", flat=True)) == [
        "Kaël",
        "Port Vey",
        "The Glass Bell",
        "port vey",
    ]
    assert universe.lore_entries.get(entry_id="port-vey").text == "A harbour town."  # untouched
    # The kept file is gone once imported: the same answer again is refused, nothing written twice.
    response = post(author_client, universe, {"token": token, "filename": "world.json", "titles": "new"})
    assert response.status_code == 400 and "expired" in response.content.decode()


def test_an_import_without_title_merges_goes_straight_to_the_report(author_client, universe):
    world = {"entries": {"1": WORLD["entries"]["1"]}}
    html = post(author_client, universe, {"file": upload("world.json", json.dumps(world).encode())}).content.decode()
    assert 'id="import-report"' in html and "would merge" not in html


def test_a_card_merge_by_title_is_asked_too(author_client, universe):
    card = {
        "spec": "chara_card_v2",
        "data": {
            "name": "Mira",
            "description": "A trader.",
            "character_book": {"entries": [{"id": 1, "keys": ["Vey"], "name": "Port Vey", "content": "Mira's port."}]},
        },
    }
    html = post(
        author_client, universe, {"file": upload("mira.json", json.dumps(card).encode()), "match_titles": "on"}
    ).content.decode()
    assert "would merge 1 entry by title" in html and 'name="match_titles" value="on"' in html
    assert not universe.lore_entries.filter(title="Mira").exists()
    token = re.search(r'name="token" value="([^"]+)"', html).group(1)
    post(author_client, universe, {"token": token, "filename": "mira.json", "match_titles": "on", "titles": "merge"})
    assert universe.lore_entries.get(entry_id="port-vey").text == "Mira's port."


@pytest.mark.parametrize(
    "raw, kind, said",
    [
        ({"name": "Location: The Reach", "keys": ["reach"]}, "place", "name label"),
        ({"comment": "[Character] Hesper", "keys": ["hesper"]}, "character", "comment label"),
        ({"comment": "Faction - The Tide Guild", "keys": ["guild"]}, "faction", "comment label"),
        ({"name": "Bell", "keys": ["bell"], "extensions": {"category": "Item"}}, "item", "extensions.category"),
        ({"name": "Mira", "keys": ["mira"]}, "character", "the card's own character"),
        ({"name": "Dawn: a hope", "keys": ["dawn"]}, "", ""),  # "Dawn" names no kind
        ({"name": "The Glass Bell", "keys": ["bell"]}, "", ""),
    ],
)
def test_kinds_come_from_where_the_card_says(raw, kind, said):
    assert card_entry_kind(raw, title=raw.get("name") or raw.get("comment"), keys=raw["keys"], card_name="Mira") == (
        kind,
        said,
    )


def test_titles_keep_the_cards_spelling():
    assert title_from_key("glass bell", "The Glass Bell rings at dusk.") == "Glass Bell"
    assert title_from_key("glass bell", "the glass bell rings") == "Glass bell"
    assert title_from_key("drag(on|ons)", "Dragons.") == "drag(on|ons)"


def test_a_card_book_imports_with_the_cards_titles_and_kinds(author, universe):
    from studio.universes import services

    card = {
        "spec": "chara_card_v2",
        "data": {
            "name": "Ilya Voss",
            "description": "An apprentice.",
            "character_book": {
                "entries": [
                    {"id": 1, "keys": ["glass bell", "bell"], "content": "The Glass Bell sings to Ilya."},
                    {"id": 2, "keys": ["reach"], "comment": "Location: The Drowned Reach", "content": "Grey water."},
                    {
                        "id": 3,
                        "keys": ["keeper"],
                        "name": "Old Keeper",
                        "content": "He tends the light.",
                        "extensions": {"kind": "character"},
                    },
                ]
            },
        },
    }
    book = character_card.parse_card(json.dumps(card).encode())
    report = services.card_import(universe=universe, user=author, book=book)
    kinds = dict(universe.lore_entries.filter(extensions__card__isnull=False).values_list("title", "kind"))
    assert kinds == {"Glass Bell": "concept", "Location: The Drowned Reach": "place", "Old Keeper": "character"}
    line = next(li for li in report.lines if li.title == "Location: The Drowned Reach")
    assert "name label → kind place" in line.acting or "comment label → kind place" in line.acting

"""Character Cards as characters: the Character entry, the portrait, the book apart, round trips.

The cards are written here and in tests/support/cards.py in SillyTavern's formats (V2 with the V1 top-level mirror fields,
V3, V1; JSON and PNG with `chara` / `ccv3` tEXt chunks), not downloaded.
"""

from __future__ import annotations

import base64
import copy
import io
import json
import re
import zlib

import pytest
from PIL import Image
from PIL.PngImagePlugin import PngInfo

from studio.universes import services
from studio.universes.interchange import card_export, card_fields, card_png, character_card
from studio.world.models import LoreEntry
from studio.universes.selectors import with_link_ids

from tests.support.cards import DATA, v2_card


@pytest.fixture(autouse=True)
def no_embedding(monkeypatch):
    monkeypatch.setattr("studio.universes.services.lore.schedule_lore_sync", lambda **kw: None)


def v3_card():
    card = v2_card(
        {
            **copy.deepcopy(DATA),
            "nickname": "Lio",
            "group_only_greetings": ["We meet in company."],
            "assets": [{"type": "icon", "uri": "ccdefault:", "name": "main", "ext": "png"}],
            "creator_notes_multilingual": {"fr": "Pour les scènes lentes."},
            "source": ["tests"],
            "creation_date": 1764500000,
            "modification_date": 1764500001,
        }
    )
    card.update({"spec": "chara_card_v3", "spec_version": "3.0"})
    return card


def portrait(**chunks) -> bytes:
    """A small but real portrait: pixels, a gAMA-free but metadata-rich PNG, card chunks."""
    image = Image.new("RGB", (24, 32))
    image.putdata([((x * 7) % 256, (x * 13) % 256, (x * 29) % 256) for x in range(24 * 32)])
    info = PngInfo()
    info.add_text("Title", "Liora at dusk")
    for keyword, card in chunks.items():
        info.add_text(keyword, base64.b64encode(json.dumps(card).encode()).decode())
    info.add_text("Software", "hand-made for the test")
    buffer = io.BytesIO()
    image.save(buffer, format="PNG", pnginfo=info)
    return buffer.getvalue()


def strip_axiom(value):
    """The card as written, without the `axiom` extension the studio adds to book entries."""
    if isinstance(value, dict):
        return {k: strip_axiom(v) for k, v in value.items() if k != "axiom"}
    if isinstance(value, list):
        return [strip_axiom(v) for v in value]
    return value


def do_import(universe, user, data: bytes, filename="card.json", **kwargs):
    book = character_card.parse_card(data, filename=filename)
    return services.card_import(universe=universe, user=user, book=book, **kwargs)


def character_of(universe, report) -> LoreEntry:
    return universe.lore_entries.get(entry_id=report.lines[0].entry_id)


def export(universe, character, version=None):
    entries = list(with_link_ids(universe.lore_entries.filter(extensions__card=character.entry_id)))
    return card_export.export_card(universe, entries, version=version, character=character)


def export_png(universe, character):
    entries = list(with_link_ids(universe.lore_entries.filter(extensions__card=character.entry_id)))
    return card_export.export_png(universe, entries, character=character)


def chunk_card(png: bytes, keyword: str):
    return json.loads(base64.b64decode(card_png.png_text_chunks(png)[keyword]))


@pytest.fixture
def reach(author):
    return services.universe_create(user=author, name="Reach")


# --- the Character entry --------------------------------------------------------------------


def test_card_import_creates_a_character_entry_with_every_field(reach, author):
    report = do_import(reach, author, json.dumps(v2_card()).encode())
    liora = character_of(reach, report)
    assert (liora.kind, liora.title, liora.keys) == ("character", "Liora", ["Liora"])
    assert liora.text == (
        DATA["description"] + "\n\n## Personality\n" + DATA["personality"] + "\n\n## Scenario\n" + DATA["scenario"]
    )
    kept = liora.extensions["character_card"]
    for name in (
        "first_mes",
        "alternate_greetings",
        "mes_example",
        "creator_notes",
        "system_prompt",
        "post_history_instructions",
        "tags",
        "creator",
        "character_version",
        "extensions",
    ):
        assert kept["data"][name] == DATA[name], name
    assert kept["spec"] == "chara_card_v2" and kept["v1"]["create_date"] == "2026-11-30 @10h 01m 02s 345ms"
    assert kept["book"]["token_budget"] == 800 and "entries" not in kept["book"]
    assert [(line.label, line.outcome, line.title) for line in report.lines] == [
        ("the card's character", "created", "Liora"),
        ("entry 1 (id 0)", "created", "The Veil Wood"),
        ("entry 2 (id 1)", "created", "Port Vey"),
        ("entry 3 (id 2)", "created", "Wisps"),
    ]
    assert "description → text" in report.lines[0].acting and "first_mes" in report.lines[0].kept
    assert report.created == 4 and report.notes[0].startswith("“Liora” is a Character entry (liora)")


def test_v3_nickname_is_a_key_and_v1_card_is_read(reach, author):
    liora = character_of(reach, do_import(reach, author, json.dumps(v3_card()).encode()))
    assert liora.keys == ["Liora", "Lio"]
    v1 = {k: v for k, v in v2_card().items() if k not in ("spec", "spec_version", "data")}
    report = do_import(reach, author, json.dumps(v1).encode())
    assert report.source == "Character Card JSON (V1)" and report.created == 1
    other = character_of(reach, report)
    assert (
        other.entry_id != liora.entry_id
        and other.extensions["character_card"]["data"]["creator_notes"] == DATA["creator_notes"]
    )


def test_book_entries_are_never_merged_by_title_unless_asked(reach, author):
    services.lore_entry_create(universe=reach, user=author, title="Port Vey", kind="place", text="A harbour town.")
    do_import(reach, author, json.dumps(v2_card()).encode())
    ports = reach.lore_entries.filter(title="Port Vey")
    assert ports.count() == 2 and ports.get(extensions__card="liora").text == "Liora's sister lives in Port Vey."
    assert [p.text for p in ports if "card" not in p.extensions] == ["A harbour town."]
    merged = services.universe_create(user=author, name="Merged")
    services.lore_entry_create(universe=merged, user=author, title="Port Vey", kind="place", text="A harbour town.")
    report = do_import(merged, author, json.dumps(v2_card()).encode(), match_titles=True)
    line = next(li for li in report.lines if li.title == "Port Vey")
    assert line.outcome == "updated" and "matched by same title" in line.reason
    assert merged.lore_entries.filter(title="Port Vey").count() == 1


def test_two_cards_with_the_same_book_ids_stay_apart(reach, author):
    do_import(reach, author, json.dumps(v2_card()).encode())
    other = copy.deepcopy(DATA)
    other["name"] = "Brann"
    other["character_book"]["entries"][0]["content"] = "Brann's wood is darker."
    report = do_import(reach, author, json.dumps(v2_card(other)).encode(), mode="update")
    assert report.lines[0].outcome == "created"  # a new character, even when asked to update
    assert (
        report.created == 4
        and reach.lore_entries.get(extensions__card="liora", title="The Veil Wood").text
        == "An old forest where lanterns go out."
    )


def test_update_mode_updates_the_character_and_its_book_by_card_ids(reach, author):
    liora = character_of(reach, do_import(reach, author, json.dumps(v2_card()).encode()))
    edited = copy.deepcopy(DATA)
    edited["personality"] = "patient, fierce"
    edited["character_book"]["entries"][1]["comment"] = "Port Vey harbour"  # a new title, same id
    edited["character_book"]["entries"][1]["content"] = "Her sister moved away."
    report = do_import(reach, author, json.dumps(v2_card(edited)).encode(), mode="update")
    outcomes = [(line.outcome, line.entry_id) for line in report.lines]
    assert outcomes[0] == ("updated", "liora") and report.created == 0
    assert ("updated", "port-vey") in outcomes and outcomes.count(("skipped", "the-veil-wood")) == 1
    liora.refresh_from_db()
    assert "patient, fierce" in liora.text and reach.lore_entries.count() == 4
    assert reach.lore_entries.get(entry_id="port-vey").title == "Port Vey harbour"
    again = do_import(reach, author, json.dumps(v2_card(edited)).encode(), mode="update")
    assert again.created == 0 and again.updated == 0 and again.skipped == 4


def test_a_card_import_that_fails_late_writes_nothing(reach, author):
    from django.core.exceptions import ValidationError

    with pytest.raises(ValidationError):  # the book fails after the Character entry was written
        do_import(reach, author, json.dumps(v2_card()).encode(), default_kind="not-a-kind")
    assert not reach.lore_entries.exists() and not reach.meta.filter(key="character_card").exists()


# --- round trips ------------------------------------------------------------------------------


@pytest.mark.parametrize("make", [v2_card, v3_card], ids=["v2", "v3"])
def test_json_round_trip_gives_every_field_back(reach, author, make):
    original = make()
    liora = character_of(reach, do_import(reach, author, json.dumps(original).encode()))
    exported = export(reach, liora)
    assert strip_axiom(exported) == original
    assert all("axiom" in e["extensions"] for e in exported["data"]["character_book"]["entries"])


def test_edited_character_exports_its_new_fields_and_mirrors(reach, author):
    liora = character_of(reach, do_import(reach, author, json.dumps(v2_card()).encode()))
    text = liora.text.replace("patient, watchful, dry humour", "tired").replace("She speaks softly.", "She shouts.")
    services.lore_entry_update(entry=liora, user=author, text=text, title="Liora of the Wood")
    liora.refresh_from_db()
    card = export(reach, liora)
    assert card["data"]["personality"] == card["personality"] == "tired"
    assert card["data"]["description"] == card["description"] == "A lantern-keeper of the Veil Wood.\nShe shouts."
    assert card["data"]["name"] == card["name"] == "Liora of the Wood"
    assert card["data"]["scenario"] == DATA["scenario"] and card["first_mes"] == DATA["first_mes"]


def pixels(data: bytes):
    image = Image.open(io.BytesIO(data))
    return image.size, image.convert("RGBA").tobytes()


def test_v2_png_round_trip_keeps_the_portraits_pixels(reach, author):
    """The portrait is decoded (with a pixel limit) and re-encoded on import: the same picture, re-written."""
    original = v2_card()
    png = portrait(chara=original)
    report = do_import(reach, author, png, filename="liora.png")
    liora = character_of(reach, report)
    assert liora.extensions["character_card"]["portrait"]["bytes"] > 0
    assert any(f"{len(png):,} bytes of PNG" in note for note in report.notes)
    out = export_png(reach, liora)
    # The picture is the same, only the card chunks are the export's.
    assert pixels(out) == pixels(png)
    assert strip_axiom(chunk_card(out, "chara")) == original
    v3 = strip_axiom(chunk_card(out, "ccv3"))
    assert v3["spec"] == "chara_card_v3" and v3["data"]["first_mes"] == DATA["first_mes"]
    # Importing the export and exporting again gives the same file.
    again = character_of(reach, do_import(reach, author, out, filename="liora.png", mode="update"))
    assert again.pk == liora.pk and export_png(reach, again) == out


def test_v3_png_with_both_chunks_round_trips_both(reach, author):
    v3 = v3_card()
    v2 = {**copy.deepcopy(v3), "spec": "chara_card_v2", "spec_version": "2.0"}
    png = portrait(chara=v2, ccv3=v3)
    liora = character_of(reach, do_import(reach, author, png, filename="liora.png"))
    out = export_png(reach, liora)
    assert strip_axiom(chunk_card(out, "ccv3")) == v3 and strip_axiom(chunk_card(out, "chara")) == v2
    assert pixels(out) == pixels(png)
    keywords = [k for kind, _s, _e, k in card_png._chunks(out) if k]
    assert keywords == ["chara", "ccv3"]  # the re-encoded picture's own chunks, the new card chunks before IEND


def test_card_chunks_in_compressed_text_are_replaced_too(reach, author):
    card = v2_card()
    base = portrait()
    text = b"chara\x00\x00" + zlib.compress(base64.b64encode(json.dumps(card).encode()))
    ztxt = len(text).to_bytes(4, "big") + b"zTXt" + text + zlib.crc32(b"zTXt" + text).to_bytes(4, "big")
    png = card_png.with_card_chunks(base, [])[:-12] + ztxt + base[-12:]
    liora = character_of(reach, do_import(reach, author, png, filename="z.png"))
    out = export_png(reach, liora)
    assert [kind for kind, *_ in card_png._chunks(out)].count(b"zTXt") == 0
    assert pixels(out) == pixels(base)


def test_json_card_exports_a_plain_png_and_a_missing_portrait_falls_back(reach, author, settings):
    liora = character_of(reach, do_import(reach, author, json.dumps(v2_card()).encode()))
    out = export_png(reach, liora)
    Image.open(io.BytesIO(out)).verify()
    assert strip_axiom(chunk_card(out, "chara")) == v2_card()
    png_one = character_of(reach, do_import(reach, author, portrait(chara=v2_card()), filename="l.png"))
    reference = png_one.extensions["character_card"]["portrait"]
    (settings.VAR_DIR / "portraits" / f"{reference['sha256']}.png").write_bytes(b"altered")
    assert Image.open(io.BytesIO(export_png(reach, png_one))).size == (400, 600)  # not the altered file


def test_text_sections_split_back():
    data = {"description": "Desc\n\nmore", "personality": "p", "scenario": ""}
    assert card_fields.split_text(card_fields.compose_text(data)) == {**data}
    assert card_fields.split_text("only a description") == {
        "description": "only a description",
        "personality": "",
        "scenario": "",
    }


# --- pages ------------------------------------------------------------------------------------


def upload(name: str, data: bytes):
    from django.core.files.uploadedfile import SimpleUploadedFile

    return SimpleUploadedFile(name, data)


def test_import_page_full_and_htmx_report_the_character(author_client, htmx, universe):
    url = f"/universes/{universe.slug}/exchange/import/"
    png = portrait(chara=v2_card())
    html = author_client.post(
        url, {"file": upload("liora.png", png), "format": "auto", "default_kind": "place", "character": "create"}
    ).content.decode()
    assert "<html" in html and "the card&#x27;s character" in html and "new Character entry" in html
    assert f'href="/universes/{universe.slug}/lore/liora/"' in html
    fragment = author_client.post(
        url,
        {"file": upload("liora.png", png), "format": "auto", "default_kind": "place", "character": "update"},
        **htmx,
    ).content.decode()
    assert "<html" not in fragment and 'id="import-report"' in fragment
    assert "<strong>0</strong> created" in fragment and "identical to the Character entry" in fragment
    assert universe.lore_entries.filter(kind="character", title="Liora").count() == 1
    # Book entries took the chosen kind; the universe's own Port Vey is untouched.
    assert universe.lore_entries.get(entry_id="port-vey").text == "A harbour town."
    assert universe.lore_entries.get(extensions__card="liora", title="Port Vey").kind == "place"


def test_export_views_use_the_imported_character_and_its_portrait(author_client, author, universe):
    png = portrait(chara=v2_card())
    do_import(universe, author, png, filename="liora.png")
    base = f"/universes/{universe.slug}/export"
    card = author_client.get(f"{base}/card.json").json()  # the last imported card by default
    assert strip_axiom(card) == v2_card()
    response = author_client.get(f"{base}/card.png")
    assert response["Content-Disposition"] == f'attachment; filename="{universe.slug}-liora-card.png"'
    assert pixels(response.content) == pixels(png)
    whole = author_client.get(f"{base}/card.json?character=&version=3").json()  # the whole Lore Book
    assert whole["data"]["name"] == universe.name and len(whole["data"]["character_book"]["entries"]) == 6
    assert author_client.get(f"{base}/card.json?character=kael").status_code == 404  # not from a card
    page = author_client.get(f"/universes/{universe.slug}/exchange/").content.decode()
    assert "Character “Liora”" in page and "?character=liora&amp;version=3" in page


def test_metadata_page_shows_the_card_as_readable_fields(author_client, htmx, author, universe):
    do_import(universe, author, portrait(chara=v2_card()), filename="liora.png")
    for extra in ({}, htmx):
        html = author_client.get(f"/universes/{universe.slug}/meta/", **extra).content.decode()
        assert ("<html" in html) == (not extra)
        fields = dict(re.findall(r"<dt>([^<]+)</dt><dd>(.*?)</dd>", html, re.S))
        assert "A lantern-keeper of the Veil Wood.<br>She speaks softly." in fields["Description"]
        assert "Keep replies under 200 words." in fields["Post-history instructions"]
        assert re.findall(r'<li class="card-field">([^<]+)</li>', fields["Alternate greetings"]) == [
            "*She sets the lantern down.* Sit.",
            "Again? The wood likes you.",
        ]
        assert "3 Lore Book entries from its book" in html and 'href="/universes/test-world/lore/liora/"' in html
        assert "portrait kept" in html
        assert "&quot;first_mes&quot;" not in html and '"first_mes"' not in html  # no JSON dump of the card

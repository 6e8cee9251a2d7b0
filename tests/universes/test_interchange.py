"""Character Card V2/V3 and SillyTavern world info: import, lossless re-export, reports, bad files."""

from __future__ import annotations

import base64
import io
import json
import re
import struct
import zlib

import pytest
from PIL import Image
from PIL.PngImagePlugin import PngInfo

from studio.universes import services
from studio.universes.interchange import ImportFormatError, card_export, card_png, character_card, sillytavern
from studio.universes.models import LoreRevision
from studio.world.models import LoreEntry

pytestmark = pytest.mark.django_db

ST_WORLD = {
    "name": "Harbour lore",
    "entries": {
        "0": {
            "uid": 0,
            "key": ["Vey", "harbour"],
            "keysecondary": ["salt"],
            "comment": "Port Vey",
            "content": "A harbour town that smells of salt.",
            "constant": False,
            "selective": True,
            "selectiveLogic": 0,
            "order": 100,
            "position": 0,
            "disable": False,
            "probability": 100,
            "depth": 4,
            "group": "",
            "scanDepth": None,
            "displayIndex": 0,
        },
        "5": {
            "uid": 5,
            "key": ["Mira"],
            "keysecondary": [],
            "comment": "",
            "content": "Mira trades spice.",
            "constant": True,
            "selective": False,
            "order": 50,
            "position": 1,
            "disable": True,
            "futureField": {"nested": [1, 2, None]},
        },
        "6": {"uid": 6, "key": [], "comment": "Empty", "content": "   "},
    },
}

CARD_V2 = {
    "spec": "chara_card_v2",
    "spec_version": "2.0",
    "data": {
        "name": "Kaël",
        "description": "A smuggler.",
        "personality": "wry",
        "scenario": "",
        "first_mes": "Hi.",
        "mes_example": "",
        "creator_notes": "",
        "system_prompt": "",
        "post_history_instructions": "",
        "alternate_greetings": [],
        "tags": ["rogue"],
        "creator": "me",
        "character_version": "1",
        "extensions": {"x": 1},
        "character_book": {
            "name": "Kaël's book",
            "scan_depth": 3,
            "token_budget": 500,
            "recursive_scanning": False,
            "extensions": {},
            "entries": [
                {
                    "id": 1,
                    "keys": ["Guild"],
                    "content": "The thieves' guild.",
                    "name": "The Guild",
                    "enabled": True,
                    "insertion_order": 10,
                    "case_sensitive": False,
                    "priority": 5,
                    "secondary_keys": [],
                    "selective": False,
                    "constant": False,
                    "position": "before_char",
                    "extensions": {"depth": 4},
                },
                {
                    "id": 2,
                    "keys": ["Port Vey"],
                    "content": "Kaël's home port.",
                    "comment": "Port Vey",
                    "enabled": False,
                    "insertion_order": 20,
                    "extensions": {},
                },
            ],
        },
    },
}


def png_card(payload: dict | None, keyword: str = "chara") -> bytes:
    image = Image.new("RGB", (8, 8), (10, 20, 30))
    info = PngInfo()
    if payload is not None:
        info.add_text(keyword, base64.b64encode(json.dumps(payload).encode()).decode())
    info.add_text("Comment", "not a card")
    buffer = io.BytesIO()
    image.save(buffer, format="PNG", pnginfo=info)
    return buffer.getvalue()


# --- SillyTavern -----------------------------------------------------------------------------


def test_sillytavern_import_maps_fields_and_reports(universe, author):
    book = sillytavern.parse_world_info(json.dumps(ST_WORLD).encode())
    report = services.lore_import(universe=universe, user=author, book=book, default_kind="place")
    outcomes = {line.label: (line.outcome, line.reason) for line in report.lines}
    assert outcomes["entry uid 0"] == (
        "updated",
        "changed text, keys, extensions, secondary_keys, use_probability, vectorized; matched by same title",
    )
    assert outcomes["entry uid 5"] == ("created", "new entry")
    assert outcomes["entry uid 6"] == ("skipped", "no content and no keys")
    mira = universe.lore_entries.get(title="Mira")
    assert mira.text == "Mira trades spice." and mira.keys == ["Mira"] and mira.kind == "place"
    kept = mira.extensions["sillytavern"]
    assert kept["disable"] is True and kept["futureField"] == {"nested": [1, 2, None]} and "content" not in kept
    assert json.loads(universe.meta.get(key="sillytavern_world").value) == {"name": "Harbour lore"}
    assert LoreRevision.objects.filter(action="import").count() == 2


def test_sillytavern_reexport_loses_nothing(universe, author):
    book = sillytavern.parse_world_info(json.dumps(ST_WORLD).encode())
    services.lore_import(universe=universe, user=author, book=book)
    entries = list(universe.lore_entries.prefetch_related("links"))
    exported = sillytavern.export_world_info(universe, entries)
    assert exported["name"] == "Harbour lore"
    for uid in ("0", "5"):
        original, again = ST_WORLD["entries"][uid], exported["entries"][uid]
        for field, value in original.items():
            assert again[field] == value, (uid, field)
        assert again["extensions"]["axiom"]["entry_id"]
    assert exported["entries"]["5"]["comment"] == ""  # title came from the key; the comment stays empty
    new_ids = [k for k in exported["entries"] if k not in ("0", "5")]
    assert len(new_ids) == 1 and exported["entries"][new_ids[0]]["comment"] == "Kaël"


def test_sillytavern_reimport_of_export_is_all_unchanged(universe, author):
    entries = list(universe.lore_entries.prefetch_related("links"))
    data = json.dumps(sillytavern.export_world_info(universe, entries)).encode()
    report = services.lore_import(universe=universe, user=author, book=sillytavern.parse_world_info(data))
    # The first round trip stores SillyTavern's fields (so the next export repeats them)...
    assert [line.reason for line in report.lines] == ["changed extensions; matched by same id"] * 2
    entries = list(universe.lore_entries.prefetch_related("links"))
    data2 = json.dumps(sillytavern.export_world_info(universe, entries)).encode()
    assert json.loads(data2) == json.loads(data)
    # ...and from then on an export re-imports as identical.
    report = services.lore_import(universe=universe, user=author, book=sillytavern.parse_world_info(data2))
    assert [line.outcome for line in report.lines] == ["skipped", "skipped"]
    assert all("identical" in line.reason and "same id" in line.reason for line in report.lines)


@pytest.mark.parametrize(
    "payload, message",
    [
        (b"{not json", "Not valid JSON"),
        (b"[]", 'expected an object with "entries"'),
        (json.dumps({"entries": 3}).encode(), "expected an object keyed by uid"),
        (json.dumps({"entries": {"1": {"content": 5}}}).encode(), 'entries["1"].content: expected text'),
        (json.dumps({"entries": {"1": {"key": "notalist"}}}).encode(), "expected a list of strings"),
        (json.dumps({"entries": {"1": {"disable": "yes"}}}).encode(), "expected true or false"),
        (json.dumps({"entries": {"1": {"content": "x" * 200_001}}}).encode(), "limit is 200,000"),
        (b"", "empty"),
        (json.dumps({"entries": {"1": {"content": "a\u0000b"}}}).encode(), "NUL character"),
    ],
)
def test_sillytavern_malformed_files(payload, message):
    with pytest.raises(ImportFormatError, match=message.replace("[", r"\[").replace("(", r"\(")):
        sillytavern.parse_world_info(payload)


# --- Character Card --------------------------------------------------------------------------


def test_card_json_import_makes_a_character_and_keeps_its_book_apart(universe, author):
    book = character_card.parse_card(json.dumps(CARD_V2).encode())
    report = services.card_import(universe=universe, user=author, book=book)
    assert report.source == "Character Card JSON (V2)"
    # The universe already has a "Port Vey" entry: the card's Port Vey is created beside it, not merged.
    assert [(line.outcome, line.title) for line in report.lines] == [
        ("created", "Kaël"),
        ("created", "The Guild"),
        ("created", "Port Vey"),
    ]
    assert universe.lore_entries.get(entry_id="port-vey").text == "A harbour town."
    character = universe.lore_entries.get(entry_id=report.lines[0].entry_id)
    assert character.kind == "character" and character.entry_id != "kael"  # the universe's own Kaël stays
    assert character.text == "A smuggler.\n\n## Personality\nwry" and character.keys == ["Kaël"]
    kept = character.extensions["character_card"]["data"]
    assert kept["first_mes"] == "Hi." and kept["tags"] == ["rogue"] and "character_book" not in kept
    guild = universe.lore_entries.get(title="The Guild")
    assert guild.extensions["character_book"]["priority"] == 5 and guild.extensions["card"] == character.entry_id
    assert guild.extensions["character_book"]["extensions"] == {"depth": 4}
    assert json.loads(universe.meta.get(key="character_card").value)["entry_id"] == character.entry_id
    assert any("tagged with it" in note for note in report.notes)


def test_card_reexport_loses_nothing(universe, author):
    services.card_import(universe=universe, user=author, book=character_card.parse_card(json.dumps(CARD_V2).encode()))
    character = services.card_characters(universe=universe)[0]
    entries = list(universe.lore_entries.prefetch_related("links"))
    card = card_export.export_card(universe, entries, version=2, character=character)
    assert (
        card["spec"] == "chara_card_v2" and card["data"]["personality"] == "wry" and card["data"]["tags"] == ["rogue"]
    )
    book = card["data"]["character_book"]
    assert book["scan_depth"] == 3 and book["token_budget"] == 500
    by_id = {e.get("id"): e for e in book["entries"]}
    for original in CARD_V2["data"]["character_book"]["entries"]:
        again = by_id[original["id"]]
        for field, value in original.items():
            if field == "extensions":
                assert {k: v for k, v in again["extensions"].items() if k != "axiom"} == value
            else:
                assert again[field] == value, field
    v3 = card_export.export_card(universe, entries, version=3, character=character)
    assert v3["spec"] == "chara_card_v3" and v3["spec_version"] == "3.0"


def test_png_card_import_v2_and_v3_preference(universe, author):
    v3 = {**CARD_V2, "spec": "chara_card_v3", "spec_version": "3.0"}
    v3 = json.loads(json.dumps(v3))
    v3["data"]["character_book"]["entries"][0]["content"] = "From the V3 chunk."
    image = Image.new("RGB", (8, 8))
    info = PngInfo()
    info.add_text("chara", base64.b64encode(json.dumps(CARD_V2).encode()).decode())
    info.add_text("ccv3", base64.b64encode(json.dumps(v3).encode()).decode())
    buffer = io.BytesIO()
    image.save(buffer, format="PNG", pnginfo=info)
    book = character_card.parse_card(buffer.getvalue(), filename="card.png")
    assert book.source == "Character Card PNG (V3)" and book.entries[0].text == "From the V3 chunk."
    book = character_card.parse_card(png_card(CARD_V2), filename="card.png")
    assert book.source == "Character Card PNG (V2)"


def test_exported_png_reimports(universe, author):
    entries = list(universe.lore_entries.prefetch_related("links"))
    png = card_export.export_png(universe, entries)
    Image.open(io.BytesIO(png)).verify()  # a valid PNG
    book = character_card.parse_card(png, filename="x.png")
    assert sorted(e.entry_id for e in book.entries) == ["kael", "port-vey"]
    assert {e.kind for e in book.entries} == {"character", "place"}
    report = services.lore_import(universe=universe, user=author, book=book)
    assert report.created == 0 and report.updated == 2  # the card fields are now kept with each entry
    again = character_card.parse_card(card_export.export_png(universe, list(universe.lore_entries.all())))
    report = services.lore_import(universe=universe, user=author, book=again)
    assert report.created == 0 and report.updated == 0 and report.skipped == 2


def test_png_without_chunk_is_a_clear_error():
    with pytest.raises(ImportFormatError, match="no “chara” or “ccv3” text chunk.*Comment"):
        character_card.parse_card(png_card(None), filename="plain.png")


def test_png_decompression_bomb_in_text_chunk_is_refused():
    bomb = zlib.compress(b"A" * (20 * 1024 * 1024), 9)
    body = b"chara\x00\x00" + bomb
    chunk = struct.pack(">I", len(body)) + b"zTXt" + body + struct.pack(">I", zlib.crc32(b"zTXt" + body))
    plain = png_card(None)
    data = plain[:8] + chunk + plain[8:]
    assert len(data) < 100_000
    with pytest.raises(ImportFormatError, match="inflates past"):
        character_card.parse_card(data, filename="bomb.png")


@pytest.mark.parametrize(
    "payload, message",
    [
        (b"\x89PNG\r\n\x1a\n\x00\x00\x00\x0dIHDR", "truncated"),
        (b"{bad", "Not valid JSON"),
        (
            json.dumps({"spec": "chara_card_v2", "data": {"name": "x", "alternate_greetings": "Hi"}}).encode(),
            "alternate_greetings: expected a list of strings",
        ),
        (
            json.dumps({"spec": "chara_card_v2", "data": {"name": "x", "first_mes": 3}}).encode(),
            "data.first_mes: expected text",
        ),
        (json.dumps({"spec": "chara_card_v9", "data": {}}).encode(), "Unsupported card spec"),
        (
            json.dumps({"spec": "chara_card_v2", "data": {"character_book": {"entries": {}}}}).encode(),
            "entries: expected a list",
        ),
        (
            json.dumps(
                {"spec": "chara_card_v2", "data": {"character_book": {"entries": [{"content": ["x"]}]}}}
            ).encode(),
            r"entries\[0\].content: expected text",
        ),
        (
            json.dumps({"spec": "chara_card_v2", "data": {"character_book": {"entries": [{"keys": [1]}]}}}).encode(),
            r"keys\[0\]: expected a string",
        ),
        (json.dumps([1, 2]).encode(), "Expected a JSON object"),
    ],
)
def test_card_malformed_files(payload, message):
    with pytest.raises(ImportFormatError, match=message):
        character_card.parse_card(payload)


def test_png_with_broken_base64_chunk():
    image = Image.new("RGB", (4, 4))
    info = PngInfo()
    info.add_text("chara", "%%% not base64 %%%")
    buffer = io.BytesIO()
    image.save(buffer, format="PNG", pnginfo=info)
    with pytest.raises(ImportFormatError, match="not base64"):
        character_card.parse_card(buffer.getvalue(), filename="x.png")


# --- import views -------------------------------------------------------------------------


def upload(name: str, data: bytes):
    from django.core.files.uploadedfile import SimpleUploadedFile

    return SimpleUploadedFile(name, data)


def test_import_view_full_page_report(author_client, universe):
    response = author_client.post(
        f"/universes/{universe.slug}/exchange/import/",
        {
            "file": upload("world.json", json.dumps(ST_WORLD).encode()),
            "format": "auto",
            "default_kind": "concept",
        },
    )
    html = response.content.decode()
    # “Port Vey” would merge by title alone: the page says so and asks first, writing nothing.
    assert response.status_code == 200 and "would merge 1 entry by title" in html and "“Port Vey”" in html
    assert not LoreRevision.objects.exists()
    token = re.search(r'name="token" value="([^"]+)"', html).group(1)
    response = author_client.post(
        f"/universes/{universe.slug}/exchange/import/",
        {"token": token, "filename": "world.json", "format": "auto", "default_kind": "concept", "titles": "merge"},
    )
    html = response.content.decode()
    assert response.status_code == 200 and "<html" in html and 'id="import-report"' in html
    assert (
        "<strong>1</strong> created" in html
        and "<strong>1</strong> updated" in html
        and "no content and no keys" in html
    )


def test_import_view_htmx_fragment_and_png(author_client, htmx, universe):
    response = author_client.post(
        f"/universes/{universe.slug}/exchange/import/",
        {
            "file": upload("kael.png", png_card(CARD_V2)),
            "format": "auto",
            "default_kind": "character",
        },
        **htmx,
    )
    html = response.content.decode()
    assert "<html" not in html and 'id="import-panel"' in html and "The Guild" in html
    assert universe.lore_entries.get(title="The Guild").kind == "character"


def test_import_view_bad_file_writes_nothing(author_client, htmx, universe):
    before = (LoreEntry.objects.count(), LoreRevision.objects.count(), universe.meta.count())
    for name, data in [("plain.png", png_card(None)), ("bad.json", b"{oops"), ("big.json", b" " * (9 * 1024 * 1024))]:
        response = author_client.post(
            f"/universes/{universe.slug}/exchange/import/",
            {"file": upload(name, data), "format": "auto", "default_kind": "concept"},
        )
        assert response.status_code == 400 and "Nothing was imported." in response.content.decode()
    response = author_client.post(
        f"/universes/{universe.slug}/exchange/import/",
        {"file": upload("bad.json", b"{oops"), "format": "auto", "default_kind": "concept"},
        **htmx,
    )
    assert "Nothing was imported." in response.content.decode() and "<html" not in response.content.decode()
    assert (LoreEntry.objects.count(), LoreRevision.objects.count(), universe.meta.count()) == before


def test_import_is_all_or_nothing_when_a_late_entry_fails(universe, author, monkeypatch):
    book = sillytavern.parse_world_info(json.dumps(ST_WORLD).encode())
    book.entries[1].kind = "not-a-kind"  # the second entry fails validation inside the transaction
    from django.core.exceptions import ValidationError

    with pytest.raises(ValidationError):
        services.lore_import(universe=universe, user=author, book=book)
    assert universe.lore_entries.get(entry_id="port-vey").text == "A harbour town."
    assert not LoreRevision.objects.exists()


def test_exchange_page_full_and_fragment(author_client, htmx, universe):
    assert "<html" in author_client.get(f"/universes/{universe.slug}/exchange/").content.decode()
    fragment = author_client.get(f"/universes/{universe.slug}/exchange/", **htmx).content.decode()
    assert 'id="import-panel"' in fragment and "<html" not in fragment


def test_exports_download(author_client, universe):
    base = f"/universes/{universe.slug}"
    toml = author_client.get(f"{base}/export.toml")
    assert toml["Content-Disposition"] == 'attachment; filename="test-world.toml"'
    card = author_client.get(f"{base}/export/card.json?version=3").json()
    assert card["spec"] == "chara_card_v3" and len(card["data"]["character_book"]["entries"]) == 2
    png = author_client.get(f"{base}/export/card.png").content
    assert card_png.card_json_from_png(png)["spec"] in ("chara_card_v3", "chara_card_v2")
    st = author_client.get(f"{base}/export/world-info.json").json()
    assert sorted(e["comment"] for e in st["entries"].values()) == ["Kaël", "Port Vey"]


def test_playtester_cannot_import(client, playtester, universe):
    client.force_login(playtester)
    response = client.post(
        f"/universes/{universe.slug}/exchange/import/",
        {"file": upload("world.json", json.dumps(ST_WORLD).encode()), "format": "auto", "default_kind": "concept"},
    )
    assert response.status_code == 403 and universe.lore_entries.count() == 2

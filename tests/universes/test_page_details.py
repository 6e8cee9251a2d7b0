"""Small things authors see on the pages: sorting, history values, the card summary,
mission text areas, the lore replay link, the New save help text and the favicon."""

from __future__ import annotations

import json
import re

import pytest

from studio.universes import services
from studio.universes.meta_display import meta_summary
from studio.world.models import UniverseMeta
from studio.universes.templatetags.lore_display import revision_value, text_rows

pytestmark = pytest.mark.django_db


@pytest.fixture
def author_client(client, author):
    client.force_login(author)
    return client


@pytest.fixture(autouse=True)
def no_embedding(monkeypatch):
    monkeypatch.setattr(services.lore, "_sync_lore_now", lambda universe_pk: None)


def row_titles(html: str) -> list[str]:
    return re.findall(r'<tr id="lore-row-\d+">\s*<td>.*?</td>\s*<td><a href="[^"]+">([^<]+)</a>', html, re.S)


def test_lore_sorts_by_title_whatever_the_case(author_client, author, universe):
    services.lore_entry_create(universe=universe, user=author, title="ash road", kind="place")
    services.lore_entry_create(universe=universe, user=author, title="Zed", kind="place")
    url = f"/universes/{universe.slug}/lore/"
    assert row_titles(author_client.get(url).content.decode()) == ["ash road", "Kaël", "Port Vey", "Zed"]
    assert row_titles(author_client.get(url, {"sort": "-title"}).content.decode()) == [
        "Zed",
        "Port Vey",
        "Kaël",
        "ash road",
    ]


def test_history_shows_keys_and_links_as_typed_not_as_python_lists(author_client, author, universe):
    kael = universe.lore_entries.get(entry_id="kael")
    services.lore_entry_update(entry=kael, user=author, keys=["Kaël", "the smuggler"])
    html = author_client.get(f"/universes/{universe.slug}/lore/kael/history/").content.decode()
    assert "Kaël, the smuggler" in html
    assert "[&#x27;" not in html and "['" not in html
    assert revision_value(["a", "b"]) == "a, b" and revision_value(None) == "" and revision_value("x") == "x"
    assert json.loads(revision_value({"character_book": {"id": 3}})) == {"character_book": {"id": 3}}


def test_metadata_page_shows_a_legacy_card_as_readable_fields_and_keeps_the_raw_json_folded(
    author_client, author, universe
):
    card = {
        "spec": "chara_card_v2",
        "spec_version": "2.0",
        "data": {
            "name": "Seraphina",
            "description": "x" * 1500,
            "personality": "Warm.",
            "tags": ["a", "b"],
            "scenario": "",
        },
    }
    services.meta_set(universe=universe, key="character_card", value=json.dumps(card))
    services.lore_entry_create(
        universe=universe, user=author, title="Glade", kind="place", extensions={"character_book": {"id": 1}}
    )
    html = author_client.get(f"/universes/{universe.slug}/meta/").content.decode()
    assert "Character card “Seraphina”" in html
    fields = dict(re.findall(r"<dt>([^<]+)</dt><dd>(.*?)</dd>", html, re.S))
    assert "x" * 1500 in fields["Description"] and "Warm." in fields["Personality"]
    assert re.findall(r"<li class=\"card-field\">(\w)</li>", fields["Tags"]) == ["a", "b"]
    assert "Scenario" not in fields  # empty fields are left out
    assert "1 Lore Book entry from its book" in html
    # The raw JSON is still there, inside a closed disclosure.
    raw = re.search(
        r'<details class="raw-json"><summary>Raw JSON \((\d+) characters\)</summary><pre class="wrap">(.*?)</pre>',
        html,
        re.S,
    )
    assert raw and int(raw.group(1)) == len(json.dumps(card)) and "x" * 1500 in raw.group(2)
    # A value that is not JSON (stored before the check existed) is shown as it is.
    UniverseMeta.objects.create(universe=universe, key="character_book", value="{not json")
    assert meta_summary(universe=universe, key="character_book", value="{not json") is None
    assert meta_summary(universe=universe, key="belief_mission", value="Remember debts.") is None
    html = author_client.get(f"/universes/{universe.slug}/meta/").content.decode()
    assert '<pre class="wrap">{not json</pre>' in html


def test_mission_inputs_are_text_areas_sized_to_their_text(author_client, universe):
    long_mission = "Remembers every debt, owed or owing, and who stood by. " * 4
    services.missions_set(universe=universe, missions={"Kaël": long_mission, "Mira": "Prices."})
    html = author_client.get(f"/universes/{universe.slug}/missions/").content.decode()
    areas = re.findall(
        r'<textarea name="mission" rows="(\d+)" aria-label="Mission \d+(?: \(([^)]*)\))?">([^<]*)</textarea>', html
    )
    by_name = {name: (int(rows), text) for rows, name, text in areas}
    assert by_name["Kaël"] == (text_rows(long_mission.strip()), long_mission.strip()) and by_name["Kaël"][0] >= 5
    assert by_name["Mira"][0] == 2
    assert 'input type="text" name="mission"' not in html
    assert text_rows("") == 2 and text_rows("x" * 10_000) == 12


def test_the_lore_replay_page_is_linked_from_the_universe_tabs_and_the_lore_book(author_client, universe):
    replay = f"/memory/universe/{universe.slug}/replay/"
    for page in ("", "lore/", "meta/"):
        html = author_client.get(f"/universes/{universe.slug}/{page}").content.decode()
        tabs = re.search(r'<nav class="tabs" aria-label="Universe sections">(.*?)</nav>', html, re.S).group(1)
        assert f'href="{replay}"' in tabs
    assert (
        f'href="{replay}"'
        in author_client.get(f"/universes/{universe.slug}/lore/").content.decode().split("</table>")[1]
    )
    assert author_client.get(replay).status_code == 200


def test_new_save_form_explains_each_field(client, playtester, universe):
    client.force_login(playtester)
    html = client.get("/saves/new/").content.decode()
    for name in ("universe", "name", "memory_mode", "beliefs_enabled"):
        assert f'aria-describedby="id_{name}_helptext"' in html, name
        help_text = re.search(rf'<div class="helptext" id="id_{name}_helptext">([^<]+)</div>', html)
        assert help_text and len(help_text.group(1)) > 30, name

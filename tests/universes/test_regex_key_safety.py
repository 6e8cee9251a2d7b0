"""Regex keys cannot stall the server: refused at save when catastrophic, bounded when run.

The key tester and the API's `/context` answer with a catastrophic key stored in the book
(as a book saved before the refusal would have it) and say which key ran out of time; the
form, the bulk edit and every import refuse such a key with a message naming it. No timing
is asserted: before the fix these requests did not come back at all.
"""

from __future__ import annotations

import copy
import json

import pytest
from django.core.exceptions import ValidationError
from django.core.files.uploadedfile import SimpleUploadedFile

from studio.world.models import Event, LoreEntry
from studio.universes import services
from studio.universes.interchange.toml_io import export_universe
from studio.universes.lore_health import lore_health
from studio.memory.lore_activation import REGEX_TIMEOUT

from tests.support.cards import DATA, book_entry, v2_card
from tests.support.lore_forms import form_data, url
from tests.support.regex_bombs import BOMB, BOMB_TEXT, bomb_keys, store_bomb

pytestmark = pytest.mark.django_db

REFUSED = "/^(\\w+\\s?)+$/"  # nested repeat, and \w keeps it off RE2: refused at save
ISSUE_KEY, ISSUE_TEXT = "/(a+)+$/", "a" * 29 + "!"  # the issue's key: RE2 runs it in linear time


# --- running: the key tester, /context, Lore health ------------------------------------------------


def test_key_tester_answers_and_names_the_key_that_ran_out_of_time(author_client, htmx, universe):
    store_bomb(universe)
    response = author_client.post(url(universe, "tester/"), {"text": BOMB_TEXT}, **htmx)
    html = response.content.decode()
    assert response.status_code == 200 and 'id="tester-regex-timeouts"' in html
    assert "ran past its 100 ms limit" in html and "(a|aa)+\\b$" in html and 'data-entry="kael"' in html


def test_key_tester_runs_the_issues_key_on_re2(author_client, htmx, universe):
    store_bomb(universe, key=ISSUE_KEY)
    html = author_client.post(url(universe, "tester/"), {"text": ISSUE_TEXT}, **htmx).content.decode()
    assert "No entry would activate." in html and "tester-regex-timeouts" not in html
    html = author_client.post(url(universe, "tester/"), {"text": "a" * 29}, **htmx).content.decode()
    assert 'data-entry="kael" data-code="key"' in html


def test_lore_health_lists_stored_catastrophic_keys_and_timeouts_in_play(author_client, universe, game_save):
    store_bomb(universe, "kael", BOMB)
    store_bomb(universe, "port-vey", REFUSED)
    Event.objects.create(game_save=game_save, turn_id=4, player_input=BOMB_TEXT, narrative="The clerk frowns.")
    report = lore_health(universe=universe, saves=[game_save])
    assert [(row["entry_id"], row["key"]) for row in report.slow_regex] == [("kael", BOMB), ("port-vey", REFUSED)]
    assert report.regex_timeouts == [{"entry_id": "kael", "title": "Kaël", "key": BOMB, "turns": 1}]
    html = author_client.get(url(universe, "health/"), {"save": game_save.save_id}).content.decode()
    assert 'id="health-slow-regex"' in html and "ran past the limit on 1 turn of the replay" in html


def test_lore_health_tries_a_timed_out_key_once_over_the_replay(author_client, universe, game_save, limit_hits):
    # Before: every replayed turn holding the text paid the limit again (300 turns = 30 s).
    store_bomb(universe, "kael", BOMB)
    for turn in range(4, 12):
        Event.objects.create(game_save=game_save, turn_id=turn, player_input=BOMB_TEXT, narrative="The clerk frowns.")
    report = lore_health(universe=universe, saves=[game_save])
    assert limit_hits == [BOMB]
    # Still reported on every turn it counted as not matching (the text stays in the scan window).
    assert report.regex_timeouts == [{"entry_id": "kael", "title": "Kaël", "key": BOMB, "turns": 8}]
    assert not report.regex_budget_spent


def test_lore_health_replay_stops_running_slow_keys_when_its_budget_is_spent(
    author_client, universe, game_save, limit_hits, monkeypatch
):
    monkeypatch.setattr("studio.universes.lore_health.REPLAY_REGEX_BUDGET", 0.3)
    keys = bomb_keys(12)
    for n, key in enumerate(keys):
        LoreEntry.objects.create(universe=universe, entry_id=f"bomb-{n}", title=f"Bomb {n}", keys=[key], text="x")
    for turn in range(4, 8):
        Event.objects.create(game_save=game_save, turn_id=turn, player_input=BOMB_TEXT, narrative="The clerk frowns.")
    report = lore_health(universe=universe, saves=[game_save])
    assert 0 < len(limit_hits) <= int(0.3 / REGEX_TIMEOUT) + 1  # before: 12 keys x 4 turns = 48
    assert report.regex_budget_spent
    assert sorted(row["key"] for row in report.regex_timeouts) == sorted(keys)
    assert all(row["turns"] == 4 for row in report.regex_timeouts)
    html = author_client.get(url(universe, "health/"), {"save": game_save.save_id}).content.decode()
    assert 'id="health-regex-budget"' in html


# --- refusing: the form, the bulk edit, the imports ---------------------------------------------------


def test_form_refuses_a_catastrophic_key_naming_it(author_client, universe):
    response = author_client.post(url(universe, "new/"), form_data("new-", keys=f"Hesper, {REFUSED}"))
    html = response.content.decode()
    assert response.status_code == 400 and f"“{REFUSED}” is refused" in html and "exponential" in html
    response = author_client.post(url(universe, "new/"), form_data("new-", exclude_keys=BOMB))
    assert response.status_code == 400 and f"“{BOMB}” is refused" in response.content.decode()
    assert not LoreEntry.objects.filter(title="Hesper Vale").exists()
    # the issue's key runs on RE2 in linear time here, but hangs the backtracking engines it is
    # exported to: refused too
    response = author_client.post(url(universe, "new/"), form_data("new-", keys=f"Hesper, {ISSUE_KEY}"))
    assert response.status_code == 400 and f"“{ISSUE_KEY}” is refused" in response.content.decode()
    assert not LoreEntry.objects.filter(title="Hesper Vale").exists()


def test_bulk_activation_edit_refuses_a_catastrophic_key(universe, author):
    with pytest.raises(ValidationError) as info:
        services.lore_bulk_set_activation(
            universe=universe, user=author, entry_ids=["kael"], values={"secondary_keys": [BOMB]}
        )
    assert f"“{BOMB}” is refused" in info.value.message_dict["secondary_keys"][0]
    assert universe.lore_entries.get(entry_id="kael").secondary_keys == []


def test_sillytavern_import_is_refused_with_a_message(author_client, universe):
    doc = {
        "entries": {
            "0": {"uid": 0, "key": ["dock"], "content": "ok"},
            "1": {"uid": 1, "key": [REFUSED], "comment": "Clerk", "content": "x"},
        }
    }
    upload = SimpleUploadedFile("world.json", json.dumps(doc).encode(), content_type="application/json")
    response = author_client.post(
        f"/universes/{universe.slug}/exchange/import/",
        {"file": upload, "format": "sillytavern", "default_kind": "concept"},
    )
    html = response.content.decode()
    assert response.status_code == 400 and "Nothing was imported." in html
    assert "entry uid 1 (“Clerk”)" in html and f"“{REFUSED}” is refused" in html
    assert universe.lore_entries.count() == 2  # not even the harmless entry


def test_card_import_is_refused_with_a_message(universe, author):
    from studio.universes.interchange import character_card

    data = copy.deepcopy(DATA)
    data["character_book"]["entries"].append(book_entry(3, "Bomb", ["(a|aa)+\\b$"], "x", regex=True))
    book = character_card.parse_card(json.dumps(v2_card(data)).encode(), filename="liora.json")
    with pytest.raises(ValidationError) as info:
        services.card_import(universe=universe, user=author, book=book, mode="create")
    assert any("(“Bomb”)" in message and "is refused" in message for message in info.value.messages)
    assert not universe.lore_entries.filter(title="Liora").exists()


def test_toml_import_is_refused_with_a_message(author_client, universe):
    text = export_universe(universe).replace('slug = "test-world"', 'slug = "fresh"')
    text = text.replace('kind = "character"\nkeys = []', 'kind = "character"\nkeys = ["/(a|aa)+\\\\b$/"]', 1)
    assert "(a|aa)+" in text
    upload = SimpleUploadedFile("world.toml", text.encode(), content_type="application/toml")
    response = author_client.post("/universes/import/", {"file": upload})
    html = response.content.decode()
    assert response.status_code == 400 and "Nothing was imported." in html
    assert (
        "(kael).keys: Key “/(a|aa)+\\b$/” is refused" in html
        and not LoreEntry.objects.filter(universe__slug="fresh").exists()
    )


def test_import_report_says_which_regex_keys_run_with_a_time_limit(universe, author):
    from studio.universes.interchange import sillytavern

    doc = {"entries": {"0": {"uid": 0, "key": ["/\\bking\\b/i", "/drag(on|ons)/i"], "content": "x"}}}
    report = services.lore_import(
        universe=universe, user=author, book=sillytavern.parse_world_info(json.dumps(doc).encode())
    )
    note = next(note for note in report.notes if "100 ms limit" in note)
    assert note.startswith("1 regex key uses a feature RE2 lacks")


# --- smaller defects of the lore pages -----------------------------------------------------------------


def test_form_applies_the_key_limits_the_import_applies(author_client, universe):
    from studio.universes.interchange import MAX_KEY_CHARS, MAX_KEYS

    response = author_client.post(url(universe, "new/"), form_data("new-", keys="x" * 10_000))
    assert response.status_code == 400 and f"longer than {MAX_KEY_CHARS} characters" in response.content.decode()
    many = ", ".join(f"key{n}" for n in range(5_000))
    response = author_client.post(url(universe, "new/"), form_data("new-", keys=many))
    assert response.status_code == 400 and f"5000 keys; the limit is {MAX_KEYS}" in response.content.decode()
    kael = universe.lore_entries.get(entry_id="kael")
    response = author_client.post(
        url(universe, "kael/edit/"), {"title": "Kaël", "kind": "character", "keys": many, "base_version": kael.version}
    )
    assert response.status_code == 400 and not LoreEntry.objects.filter(title="Hesper Vale").exists()
    assert universe.lore_entries.get(entry_id="kael").keys == []


def test_key_tester_takes_a_long_text_by_post(author_client, htmx, universe):
    page = author_client.get(url(universe, "tester/")).content.decode()
    assert 'method="post"' in page and "hx-post=" in page and 'name="csrfmiddlewaretoken"' in page
    text = ("The smuggler Kaël waits in the fog. " * 400)[:12_000]
    response = author_client.post(url(universe, "tester/"), {"text": text})  # without JavaScript: the full page
    html = response.content.decode()
    assert response.status_code == 200 and "<html" in html and 'data-entry="kael"' not in html  # no key yet
    services.lore_entry_update(entry=universe.lore_entries.get(entry_id="kael"), user=None, keys=["Kaël"])
    html = author_client.post(url(universe, "tester/"), {"text": text}, **htmx).content.decode()
    assert html.strip().startswith('<div id="tester-result"') and 'data-entry="kael" data-code="key"' in html


def test_key_tester_post_needs_the_csrf_token(universe, author):
    from django.test import Client

    client = Client(enforce_csrf_checks=True)
    client.force_login(author)
    assert client.post(url(universe, "tester/"), {"text": "Kaël"}).status_code == 403


def test_a_lore_edit_without_base_version_is_refused(author_client, htmx, universe, author):
    kael = universe.lore_entries.get(entry_id="kael")
    services.lore_entry_update(entry=kael, user=author, text="A newer version.", base_version=kael.version)
    for extra in ({}, htmx):
        response = author_client.post(
            url(universe, "kael/edit/"), {"title": "Kaël", "kind": "character", "text": "Overwritten?"}, **extra
        )
        assert "which version of the entry it started from (base_version)" in response.content.decode()
    kael.refresh_from_db()
    assert kael.text == "A newer version." and kael.version == 2

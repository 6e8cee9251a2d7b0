"""Editing activation fields: the grouped lore form, the detail page, the bulk editor, meta defaults."""

from __future__ import annotations

import json
import re

import pytest
from django.core.exceptions import ValidationError

from studio.universes import services
from studio.universes.activation import STUDIO_DEFAULTS, activation_values
from studio.universes.models import LoreRevision
from studio.world.models import LoreEntry

from tests.support.lore_forms import form_data, url

pytestmark = pytest.mark.django_db


def test_form_groups_the_fields_so_it_explains_itself(author_client, universe):
    html = author_client.get(url(universe, "new/")).content.decode()
    legends = re.findall(r"<legend>(.*?)</legend>", html)
    assert legends == ["Keys", "When it fires", "Groups", "Timing", "Recursion", "Budget &amp; placement"]
    assert 'name="new-secondary_keys"' in html and 'name="new-sticky"' in html and 'name="new-group_prioritize"' in html
    # a new studio entry is also found by meaning
    assert re.search(r'name="new-vectorized"[^>]*checked', html) or re.search(
        r'checked[^>]*name="new-vectorized"', html
    )


def test_create_with_activation_fields(author_client, universe):
    response = author_client.post(
        url(universe, "new/"),
        form_data(
            "new-",
            secondary_keys="/copper\\s+hood/i, /a{1,3}/",
            selective_logic="3",
            case_sensitive="true",
            scan_depth="6",
            sticky="3",
            cooldown="2",
            inclusion_group="keepers, taverns",
            group_prioritize="on",
            additional_keys="ale, smoke\nnight",
            exclude_keys="dawn",
            forced="activate",
            role="2",
            position="4",
            after_first_match="keep",
            vectorized=None,
        ),
    )
    assert response.status_code == 302
    entry = LoreEntry.objects.get(title="Hesper Vale")
    values = activation_values(entry)
    assert values["secondary_keys"] == ["/copper\\s+hood/i", "/a{1,3}/"]  # a comma inside a regex stays in it
    assert (values["selective_logic"], values["case_sensitive"], values["scan_depth"]) == (3, True, 6)
    assert (values["sticky"], values["cooldown"], values["inclusion_group"]) == (3, 2, "keepers, taverns")
    assert values["additional_keys"] == [["ale", "smoke"], ["night"]] and values["exclude_keys"] == ["dawn"]
    assert (values["forced"], values["role"], values["position"], values["after_first_match"]) == (
        "activate",
        2,
        4,
        "keep",
    )
    assert values["vectorized"] is False and values["match_whole_words"] is None
    revision = LoreRevision.objects.get(lore_entry=entry)
    assert revision.after["sticky"] == 3 and revision.after["secondary_keys"] == values["secondary_keys"]


def test_regex_key_that_does_not_compile_is_refused_naming_the_key(author_client, universe):
    response = author_client.post(url(universe, "new/"), form_data("new-", keys="Hesper, /vale(/i"))
    html = response.content.decode()
    assert response.status_code == 400 and "“/vale(/i” looks like a regular expression but does not compile" in html
    response = author_client.post(url(universe, "new/"), form_data("new-", secondary_keys="/a/b/"))
    assert "“/a/b/”" in response.content.decode() and "must be escaped" in response.content.decode()
    assert not LoreEntry.objects.filter(title="Hesper Vale").exists()


def test_service_refuses_bad_regex_and_ranges(universe, author):
    with pytest.raises(ValidationError) as info:
        services.lore_entry_create(universe=universe, user=author, title="X", keys=["/x[/"])
    assert "keys" in info.value.message_dict and "“/x[/”" in info.value.message_dict["keys"][0]
    with pytest.raises(ValidationError) as info:
        services.lore_entry_create(universe=universe, user=author, title="X", activation={"probability": 101})
    assert "probability" in info.value.message_dict


def test_edit_page_changes_fields_and_the_inline_row_leaves_them(author_client, htmx, universe, author):
    kael = universe.lore_entries.get(entry_id="kael")
    response = author_client.post(
        url(universe, "kael/edit/"),
        form_data(
            title="Kaël",
            keys="Kael",
            text="Kaël is a smuggler.",
            constant="on",
            match_whole_words="false",
            delay_until_recursion="2",
            priority="-3",
            links="Port Vey",
            base_version=kael.version,
        ),
    )
    assert response.status_code == 302
    kael.refresh_from_db()
    assert (kael.constant, kael.match_whole_words, kael.delay_until_recursion, kael.priority) == (True, False, 2, -3)
    # the inline edit row has no activation fields: saving it keeps them
    response = author_client.post(
        url(universe, "kael/edit/"),
        {
            "title": "Kaël the Fox",
            "kind": "character",
            "text": "Kaël is a smuggler.",
            "keys": "Kael",
            "base_version": kael.version,
        },
        **htmx,
    )
    assert response.status_code == 200
    kael.refresh_from_db()
    assert kael.title == "Kaël the Fox" and kael.constant is True and kael.priority == -3
    history = author_client.get(url(universe, "kael/history/")).content.decode()
    assert "constant" in history and "delay_until_recursion" in history


def test_edit_form_shows_current_values(author_client, universe, author):
    kael = universe.lore_entries.get(entry_id="kael")
    services.lore_entry_update(
        entry=kael,
        user=author,
        activation={"sticky": 7, "case_sensitive": True, "additional_keys": [["a", "b"], ["c"]]},
    )
    html = author_client.get(url(universe, "kael/edit/")).content.decode()
    assert re.search(r'name="sticky"[^>]*value="7"', html)
    assert re.search(r'<option value="true" selected>Yes</option>', html)
    assert "a, b\nc</textarea>" in html


def test_detail_page_shows_activation_and_bad_keys(author_client, universe, author):
    kael = universe.lore_entries.get(entry_id="kael")
    services.lore_entry_update(
        entry=kael,
        user=author,
        keys=["/x(/", "Kael"],
        strict_keys=False,
        activation={"sticky": 4, "inclusion_group": "crew"},
    )
    html = author_client.get(url(universe, "kael/")).content.decode()
    assert '<section id="activation">' in html and "<caption>Timing</caption>" in html
    assert "<th>Sticky (messages)</th><td><strong>4</strong></td>" in html
    assert "<th>Cooldown (messages)</th><td>0</td>" in html
    assert "“/x(/” looks like a regular expression but does not compile" in html


@pytest.mark.parametrize("with_htmx", [True, False])
def test_bulk_disable_and_meaning_off(author_client, htmx, universe, with_htmx):
    extra = htmx if with_htmx else {}
    response = author_client.post(
        url(universe, "bulk/"), {"entries": ["kael", "port-vey"], "action": "disable"}, **extra
    )
    assert response.status_code == (200 if with_htmx else 302)
    if with_htmx:
        html = response.content.decode()
        assert "Disable: 2 entries changed." in html and "<html" not in html and "disabled</span>" in html
    assert set(universe.lore_entries.values_list("enabled", flat=True)) == {False}
    author_client.post(url(universe, "bulk/"), {"entries": ["kael"], "action": "unvectorize"}, **extra)
    assert universe.lore_entries.get(entry_id="kael").vectorized is False
    assert LoreRevision.objects.filter(action="update", entry_id="kael").count() == 2


def test_bulk_refuses_what_a_playtester_asks(client, playtester, universe):
    client.force_login(playtester)
    response = client.post(url(universe, "bulk/"), {"entries": ["kael"], "action": "disable"})
    assert response.status_code == 403 and universe.lore_entries.get(entry_id="kael").enabled is True


@pytest.mark.parametrize(
    "key, value, stored",
    [
        ("lore_scan_depth", " 6 ", "6"),
        ("lore_token_budget", "1200", "1200"),
        ("lore_recursion_depth", "0", "0"),
        ("lore_case_sensitive", "TRUE", "true"),
        ("lore_match_whole_words", "false", "false"),
    ],
)
def test_meta_lore_defaults_are_validated(key, value, stored):
    assert services.meta_validate(key=key, value=value) == stored


@pytest.mark.parametrize(
    "key, value, fragment",
    [
        ("lore_scan_depth", "two", "whole number"),
        ("lore_scan_depth", "1001", "between 0 and 1000"),
        ("lore_case_sensitive", "maybe", "true or false"),
        ("lore_recursion_depth", "-1", "between 0 and 100"),
    ],
)
def test_meta_lore_defaults_refused(key, value, fragment):
    with pytest.raises(ValidationError) as info:
        services.meta_validate(key=key, value=value)
    assert fragment in " ".join(info.value.message_dict["value"])


def test_new_studio_entries_default_to_vectorized(universe, author):
    entry = services.lore_entry_create(universe=universe, user=author, title="New")
    assert activation_values(entry) == STUDIO_DEFAULTS and entry.vectorized is True


def test_import_report_page_lists_acting_kept_and_warnings(author_client, universe):
    from django.core.files.uploadedfile import SimpleUploadedFile

    doc = {
        "entries": {
            "0": {
                "uid": 0,
                "key": ["Vey"],
                "content": "@@activate\nA harbour.",
                "sticky": 2,
                "automationId": "qr-1",
                "displayIndex": 0,
            }
        }
    }
    response = author_client.post(
        f"/universes/{universe.slug}/exchange/import/",
        {
            "file": SimpleUploadedFile("w.json", json.dumps(doc).encode()),
            "format": "sillytavern",
            "default_kind": "concept",
        },
    )
    html = response.content.decode()
    assert "<strong>acts:</strong> key, content, sticky, @@activate" in html
    assert "<strong>kept only:</strong> uid, automationId, displayIndex" in html
    assert "⚠ automationId: SillyTavern runs a Quick Reply script; the studio does not" in html


def test_card_book_settings_become_universe_defaults_when_unset(universe, author):
    from studio.universes.interchange import character_card

    card = {
        "spec": "chara_card_v2",
        "spec_version": "2.0",
        "data": {
            "name": "X",
            "character_book": {
                "scan_depth": 5,
                "token_budget": 700,
                "recursive_scanning": False,
                "entries": [{"keys": ["a"], "content": "b", "enabled": True, "insertion_order": 1, "extensions": {}}],
            },
        },
    }
    services.meta_set(universe=universe, key="lore_token_budget", value="300")
    report = services.lore_import(
        universe=universe, user=author, book=character_card.parse_card(json.dumps(card).encode())
    )
    meta = dict(universe.meta.values_list("key", "value"))
    assert (meta["lore_scan_depth"], meta["lore_recursion_depth"], meta["lore_token_budget"]) == ("5", "0", "300")
    assert any("keeps its own 300" in note for note in report.notes)

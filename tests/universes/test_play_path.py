"""From a universe to play in two clicks: New save on the Overview, a ready form, the Metadata page's keys."""

from __future__ import annotations

import re

import pytest
from django.test import override_settings

from studio.world.models import MemoryMode, Save, UniverseMeta
from studio.universes import services

pytestmark = pytest.mark.django_db


def test_overview_offers_new_save_and_the_form_is_ready_to_submit(client, playtester, universe):
    client.force_login(playtester)
    page = client.get(f"/universes/{universe.slug}/").content.decode()
    link = re.search(r'<a class="button" href="([^"]+)" id="new-save">New save</a>', page)
    assert link and link.group(1) == f"/saves/new/?universe={universe.slug}"
    form = client.get(link.group(1)).content.decode()
    assert f'value="{universe.name} — play 1"' in form
    assert re.search(rf'<option value="{universe.pk}" selected>', form)
    response = client.post(
        "/saves/new/",
        {
            "universe": universe.pk,
            "name": f"{universe.name} — play 1",
            "memory_mode": "classic",
            "beliefs_enabled": "on",
        },
    )
    game_save = Save.objects.get(universe=universe)
    assert response.status_code == 302 and response["Location"] == f"/saves/{game_save.save_id}/"
    assert f'value="{universe.name} — play 2"' in client.get(link.group(1)).content.decode()


def test_memory_mode_is_living_when_a_model_is_connected_and_the_form_says_why(client, playtester, universe):
    client.force_login(playtester)
    with override_settings(AXIOM_LLM_BASE_URL=""):
        html = client.get(f"/saves/new/?universe={universe.slug}").content.decode()
    assert re.search(r'<option value="classic" selected>', html) and "no model is connected" in html
    with override_settings(AXIOM_LLM_BASE_URL="http://127.0.0.1:9/v1"):
        html = client.get(f"/saves/new/?universe={universe.slug}").content.decode()
    assert re.search(rf'<option value="{MemoryMode.LIVING}" selected>', html) and "because a model is connected" in html


def test_a_reader_without_play_access_gets_no_new_save_button(client, outsider, universe):
    client.force_login(outsider)
    assert 'id="new-save"' not in client.get(f"/universes/{universe.slug}/").content.decode()


def test_metadata_offers_the_known_keys_with_help_and_keeps_free_keys_below(author_client, universe):
    services.meta_set(universe=universe, key="weather", value="rain")
    html = author_client.get(f"/universes/{universe.slug}/meta/").content.decode()
    known, free = html.split('id="free-keys-heading"')
    for key in (
        "narrator_style",
        "tone",
        "era",
        "narrator_instructions",
        "sampler_temperature",
        "sampler_top_p",
        "sampler_max_tokens",
        "sampler_repetition_penalty",
        "lore_scan_depth",
        "lore_recursion_depth",
        "context_share_narrative",
        "player_character",
        "player_description",
    ):
        assert f"<code>{key}</code>" in known, key
    assert "play uses 2" in known  # the scan depth's default, shown while unset
    assert "<code>weather</code>" in free and "<code>weather</code>" not in known
    # A known key's Set link opens the add form on that key.
    assert f'href="/universes/{universe.slug}/meta/?key=tone#meta-add"' in known
    form = author_client.get(f"/universes/{universe.slug}/meta/?key=tone").content.decode()
    assert re.search(r'name="key" value="tone"', form)


def test_the_add_form_does_not_keep_the_last_key_after_saving(author_client, htmx, universe):
    response = author_client.post(f"/universes/{universe.slug}/meta/save/", {"key": "tone", "value": "grim"}, **htmx)
    html = response.content.decode()
    assert "Saved “tone”" in html
    oob = re.search(r'<form id="meta-add"[^>]*hx-swap-oob="true"[^>]*>(.*?)</form>', html, re.S)
    assert oob, "the add form is replaced out of band"
    key_input = re.search(r'<input[^>]*name="key"[^>]*>', oob.group(1)).group(0)
    assert "value=" not in key_input and "grim" not in oob.group(1)


def test_new_universes_start_with_recursion_on_as_sillytavern_ships_it(author, universe):
    created = services.universe_create(user=author, name="Fresh")
    assert "lore_recursion_depth" not in dict(created.meta.values_list("key", "value"))
    from studio.memory.lore.activation_state import universe_book

    assert universe_book(created).defaults.recursion_depth == 3  # the engine's default passes: on
    UniverseMeta.objects.create(universe=universe, key="lore_recursion_depth", value="0")
    assert universe_book(universe).defaults.recursion_depth == 0  # an author's own setting stays

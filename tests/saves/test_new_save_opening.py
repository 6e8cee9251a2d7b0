"""The new-save form (issue 30): it offers the universe's persona (its authors may change it there)
and the opening to start from; creating appends the chosen greeting as turn 1, with no model."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group
from django.urls import reverse

from studio.roles import PLAYTESTERS
from studio.world.models import Event, Save
from studio.universes import services

pytestmark = pytest.mark.django_db

GREETINGS = ["Rain on the quay. {{user}} waits.", "The ledger slams shut.", "A bell rings twice."]


@pytest.fixture
def opened(universe):
    services.opening_set(universe=universe, first_message=GREETINGS[0], alternate_greetings=GREETINGS[1:], scenario="")
    services.persona_set(universe=universe, name="Wren", description="A diver of the Silt Choir.")
    return universe


@pytest.fixture
def author_player(client, author):
    author.groups.add(Group.objects.get_or_create(name=PLAYTESTERS)[0])
    client.force_login(author)
    return client


def test_the_form_offers_the_persona_and_the_greetings(author_player, opened):
    html = author_player.get(reverse("saves:create") + f"?universe={opened.slug}").content.decode()
    assert 'name="persona_name"' in html and 'value="Wren"' in html and "A diver of the Silt Choir." in html
    assert "Rain on the quay. Wren waits." in html  # macros filled as play fills them
    assert html.count('name="opening"') == 4  # no opening, then the three greetings
    fragment = author_player.get(
        reverse("saves:create"), {"universe": str(opened.pk)}, HTTP_HX_REQUEST="true"
    ).content.decode()
    assert fragment.lstrip().startswith("<form") and "The ledger slams shut." in fragment
    # Without JavaScript the "Show" button posts the form back with the universe chosen: nothing is created.
    page = author_player.post(reverse("saves:create"), {"universe": opened.pk, "name": "Kept", "preview": "1"})
    assert page.status_code == 200 and "A bell rings twice." in page.content.decode() and not Save.objects.exists()


def test_creating_appends_the_chosen_greeting_and_the_changed_persona(author_player, opened):
    response = author_player.post(
        reverse("saves:create"),
        {
            "universe": opened.pk,
            "name": "From greeting 2",
            "memory_mode": "classic",
            "beliefs_enabled": "on",
            "persona_name": "Wren Halloway",
            "persona_description": "A diver.",
            "opening": "2",
        },
    )
    game_save = Save.objects.get(name="From greeting 2")
    assert response.status_code == 302 and response["Location"] == game_save.get_absolute_url()
    event = Event.objects.get(game_save=game_save)
    assert (event.turn_id, event.player_input, event.narrative) == (1, "", "The ledger slams shut.")
    assert services.persona_of(universe=opened).name == "Wren Halloway"
    game_save.refresh_from_db()
    assert game_save.current_turn == 1


def test_a_playtester_sees_the_persona_but_does_not_change_it(client, playtester, opened):
    client.force_login(playtester)
    html = client.get(reverse("saves:create") + f"?universe={opened.slug}").content.decode()
    assert 'name="persona_name"' not in html and "Wren: A diver of the Silt Choir." in html
    client.post(
        reverse("saves:create"),
        {
            "universe": opened.pk,
            "name": "Mine",
            "memory_mode": "classic",
            "persona_name": "Someone else",
            "opening": "",
        },
    )
    game_save = Save.objects.get(name="Mine")
    assert services.persona_of(universe=opened).name == "Wren" and game_save.current_turn == 0


def test_a_bad_persona_creates_nothing(author_player, opened):
    response = author_player.post(
        reverse("saves:create"),
        {"universe": opened.pk, "name": "Nope", "memory_mode": "classic", "persona_name": "Bad {name}", "opening": "1"},
    )
    assert response.status_code == 200 and "braces" in response.content.decode()
    assert not Save.objects.filter(name="Nope").exists()

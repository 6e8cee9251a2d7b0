"""The Who-knows-what pages: the table at turn N (full page and htmx fragment), a character's
timeline, presence and reveal edits (playtesters only), presence on the timeline."""

from __future__ import annotations

import pytest
from django.urls import reverse

from studio.memory.facts import Fact, insert_facts
from studio.memory.knowledge.models import Presence, Reveal
from studio.saves.services import turn_append

pytestmark = pytest.mark.django_db


@pytest.fixture
def played(living, no_runner):
    turn_append(
        game_save=living, player_input="a", narrative="a", state={"present": ["Mira", "Kael"], "location": "dock"}
    )
    insert_facts(living.save_id, 1, [Fact("Kael owes Ivo forty crowns.", entities=["Kael"])])
    turn_append(game_save=living, player_input="b", narrative="b", state={"present": ["Ivo"]})
    return living


def test_table_at_turn_with_reasons(client, playtester, played):
    client.force_login(playtester)
    url = reverse("memory:knowledge", args=[played.save_id])
    page = client.get(url + "?turn=1").content.decode()
    assert "Who knows what" in page and 'data-turn="1"' in page
    assert "Mira was present at turn 1" in page and "Ivo was not present at turn 1 and was not told it" in page
    assert "The Ledger" in page and "secret (known by Kael)" in page
    fragment = client.get(url + "?turn=2", HTTP_HX_REQUEST="true").content.decode()
    assert fragment.startswith('\n<div id="knowledge-table"') or fragment.lstrip().startswith(
        '<div id="knowledge-table"'
    )
    assert "<html" not in fragment


def test_character_timeline(client, playtester, played):
    client.force_login(playtester)
    page = client.get(reverse("memory:knowledge_character", args=[played.save_id, "Mira"])).content.decode()
    assert "Kael owes Ivo forty crowns." in page and "Mira was present at turn 1" in page
    assert "The Night Watch" in page or "The Tunnel" in page  # a secret she knows from the start (her faction)


def test_presence_edit_and_reveals(client, playtester, played):
    client.force_login(playtester)
    response = client.post(
        reverse("memory:presence_edit", args=[played.save_id, 2]),
        {"present": ["Mira"], "others": "Stranger"},
        HTTP_HX_REQUEST="true",
    )
    assert response.status_code == 200 and "Mira, Stranger" in response.content.decode()
    assert Presence.objects.get(game_save=played, turn_id=2).characters == ["Mira", "Stranger"]
    response = client.post(
        reverse("memory:reveal_create", args=[played.save_id]),
        {"turn": "2", "target": "entry:ledger", "character": "Mira", "told_by": "Kael"},
    )
    assert response.status_code == 302
    reveal = Reveal.objects.get(game_save=played)
    assert (reveal.entry_id, reveal.character, reveal.told_by) == ("ledger", "Mira", "Kael")
    bad = client.post(
        reverse("memory:reveal_create", args=[played.save_id]),
        {"turn": "9", "target": "entry:ledger", "character": "Mira"},
        follow=True,
    )
    assert "Reveal not added" in bad.content.decode() and Reveal.objects.count() == 1
    client.post(reverse("memory:reveal_delete", args=[played.save_id, reveal.pk]))
    assert not Reveal.objects.exists()


def test_editing_needs_the_playtester_role(client, outsider, played):
    played.universe.members.add(outsider)  # may read the save, holds no role
    client.force_login(outsider)
    assert client.get(reverse("memory:knowledge", args=[played.save_id])).status_code == 200
    response = client.post(reverse("memory:presence_edit", args=[played.save_id, 1]), {"present": ["Ivo"]})
    assert response.status_code == 403
    assert Presence.objects.get(game_save=played, turn_id=1).characters == ["Mira", "Kael"]


def test_timeline_shows_presence_with_its_picker(client, playtester, played):
    client.force_login(playtester)
    page = client.get(reverse("saves:timeline", args=[played.save_id])).content.decode()
    assert "Present at turn 1:" in page and "Mira, Kael" in page and 'name="present"' in page


def test_lore_health_flags_public_secrets_and_unwitnessed_facts(client, author, played):
    from studio.memory.knowledge.reveals import reveal_add

    for name in ("Mira", "Ivo", "Ash"):
        reveal_add(game_save=played, turn_id=2, character=name, entry_id="ledger")
    insert_facts(played.save_id, 2, [Fact("A bell rang somewhere.")])
    from studio.memory.knowledge.presence import presence_set

    presence_set(game_save=played, turn_id=2, characters=[])
    client.force_login(author)
    url = reverse("universes:lore_health", args=[played.universe.slug]) + f"?save={played.save_id}"
    page = client.get(url).content.decode()
    assert "Secrets every character knows by now" in page and "The Ledger" in page
    # The player (Ash) acted in turn 2 ("b"): they witnessed it, whoever else the presence names.
    assert "A bell rang somewhere." not in page
    # A universe that turns that off: nobody is recorded present at turn 2.
    played.universe.meta.create(key="pov_player_on_scene", value="false")
    page = client.get(url).content.decode()
    assert "Facts nobody witnessed" in page and "A bell rang somewhere." in page


@pytest.mark.parametrize(
    "target", ["foo", "https://evil.example/steal", "//evil.example/x", "/\\evil.example", "javascript:alert(1)"]
)
def test_presence_edit_follows_only_a_path_of_this_site(client, playtester, played, target):
    """`next=foo` was a 500 (NoReverseMatch, after the write); an address elsewhere was followed."""
    client.force_login(playtester)
    response = client.post(
        reverse("memory:presence_edit", args=[played.save_id, 1]), {"present": ["Mira"], "next": target}
    )
    assert response.status_code == 302
    assert response["Location"] == reverse("saves:turn_detail", args=[played.save_id, 1])
    own = reverse("memory:knowledge", args=[played.save_id]) + "?turn=1"
    assert (
        client.post(reverse("memory:presence_edit", args=[played.save_id, 1]), {"present": ["Mira"], "next": own})[
            "Location"
        ]
        == own
    )


@pytest.mark.parametrize("name", ["Mi\x00ra", "M" * 5000, "Two\nlines"])
def test_presence_and_reveals_refuse_names_the_api_refuses(client, playtester, played, name):
    client.force_login(playtester)
    before = list(Presence.objects.filter(game_save=played).values_list("turn_id", "characters"))
    reveals_before = list(Reveal.objects.filter(game_save=played).values_list("pk", flat=True))
    client.post(reverse("memory:presence_edit", args=[played.save_id, 1]), {"present": [name]})
    client.post(reverse("memory:presence_edit", args=[played.save_id, 1]), {"others": name})
    assert list(Presence.objects.filter(game_save=played).values_list("turn_id", "characters")) == before
    page = client.post(
        reverse("memory:reveal_create", args=[played.save_id]),
        {"target": "entry:ledger", "turn": "1", "character": name},
        follow=True,
    ).content.decode()
    assert "Reveal not added" in page and "character.name" in page
    # Compared by rows, never looked up by the name: PostgreSQL refuses a NUL even in a lookup.
    assert list(Reveal.objects.filter(game_save=played).values_list("pk", flat=True)) == reveals_before

"""Saves list, create, and the playtest console (append a turn): full pages and htmx fragments."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from studio.memory.models import Fact, Job, JobKind, MentalModel, Observation
from studio.world.models import Event, MemoryMode, Save, StateCache, Universe

pytestmark = pytest.mark.django_db


def test_list_shows_counts_per_save_grouped_by_universe(client, playtester, game_save, universe):
    Fact.objects.create(game_save=game_save, turn_id=1, statement="Kaël docks.", entities=["Kaël"])
    Fact.objects.create(game_save=game_save, turn_id=2, statement="Mira pays.", entities=["Mira"])
    Observation.objects.create(game_save=game_save, statement="Kaël is broke.", subject="Kaël")
    Observation.objects.create(game_save=game_save, statement="Retired.", subject="Kaël", deleted_turn_id=2)
    MentalModel.objects.create(game_save=game_save, subject="Kaël", summary="A smuggler.")
    client.force_login(playtester)
    response = client.get(reverse("saves:list"))
    assert response.status_code == 200
    html = response.content.decode()
    assert "<h2>Test World</h2>" in html
    row = html[html.index(f'data-save="{game_save.save_id}"') :]
    row = row[: row.index("</tr>")]
    # turns 3, facts 2, live beliefs 1 (the retired one is not counted), models 1
    assert [c.split("<")[0] for c in row.split('class="num">')[1:]] == ["3", "2", "1", "1"]


def test_list_is_one_query_for_the_saves_however_many(client, playtester, universe):
    for i in range(12):
        s = Save.objects.create(universe=universe, name=f"Run {i}")
        Fact.objects.create(game_save=s, turn_id=1, statement="x")
    client.force_login(playtester)
    client.get(reverse("saves:list"))  # warm the session and group caches
    with CaptureQueriesContext(connection) as few:
        client.get(reverse("saves:list"))
    Save.objects.create(universe=universe, name="one more")
    with CaptureQueriesContext(connection) as more:
        client.get(reverse("saves:list"))
    assert len(more) == len(few)


def test_list_fragment_filters_by_universe(client, playtester, game_save, universe):
    other = Universe.objects.create(name="Other World", slug="other")
    other.members.add(playtester)
    Save.objects.create(universe=other, name="Elsewhere run")
    client.force_login(playtester)
    full = client.get(reverse("saves:list"))
    assert "Elsewhere run" in full.content.decode() and "Run 1" in full.content.decode()
    fragment = client.get(reverse("saves:list"), {"universe": "other"}, HTTP_HX_REQUEST="true")
    html = fragment.content.decode()
    assert html.lstrip().startswith('<div id="save-table">')
    assert "<html" not in html
    assert "Elsewhere run" in html and "Run 1" not in html


def test_list_hides_saves_of_other_universes(client, outsider, game_save):
    client.force_login(outsider)
    assert "Run 1" not in client.get(reverse("saves:list")).content.decode()


def test_create_save(client, playtester, universe):
    client.force_login(playtester)
    page = client.get(reverse("saves:create"), {"universe": universe.slug})
    assert page.status_code == 200 and 'name="memory_mode"' in page.content.decode()
    fragment = client.get(reverse("saves:create"), HTTP_HX_REQUEST="true")
    assert fragment.content.decode().lstrip().startswith("<form") and "<html" not in fragment.content.decode()
    response = client.post(
        reverse("saves:create"),
        {"universe": universe.pk, "name": "Living run", "memory_mode": MemoryMode.LIVING, "beliefs_enabled": "on"},
    )
    save = Save.objects.get(name="Living run")
    assert response.status_code == 302 and response["Location"] == save.get_absolute_url()
    assert save.memory_mode == MemoryMode.LIVING and save.beliefs_enabled
    assert save.meta == {"belief_mission": "Remember debts."}  # Universe_Meta copied
    assert Job.objects.filter(game_save=save, kind=JobKind.SYNC_LORE).exists()


def test_create_refuses_a_universe_the_user_does_not_belong_to(client, playtester, universe):
    foreign = Universe.objects.create(name="Foreign", slug="foreign")
    client.force_login(playtester)
    response = client.post(reverse("saves:create"), {"universe": foreign.pk, "name": "x", "memory_mode": "classic"})
    assert response.status_code == 200
    assert "Select a valid choice" in response.content.decode()
    assert not Save.objects.filter(universe=foreign).exists()


def test_console_full_page_and_fragment(client, playtester, game_save):
    client.force_login(playtester)
    page = client.get(game_save.get_absolute_url())
    html = page.content.decode()
    assert page.status_code == 200 and "<html" in html
    assert "Turn 3 text." in html and 'id="append-form"' in html and "Write turn 4 by hand" in html
    fragment = client.get(game_save.get_absolute_url(), HTTP_HX_REQUEST="true")
    html = fragment.content.decode()
    assert html.lstrip().startswith('<div id="console"') and "<html" not in html and "Turn 3 text." in html


def test_console_hides_the_append_form_from_readers(client, universe, game_save):
    from django.contrib.auth.models import User

    reader = User.objects.create_user("reader", password="pw")
    universe.members.add(reader)
    client.force_login(reader)
    html = client.get(game_save.get_absolute_url()).content.decode()
    assert "Turn 3 text." in html and 'id="append-form"' not in html


def test_append_turn_htmx_returns_the_console_with_the_new_turn(client, playtester, game_save):
    client.force_login(playtester)
    response = client.post(
        reverse("saves:turn_append", args=[game_save.save_id]),
        {"player_input": "I pay Mira.", "narrative": "Kaël counts out twelve silver crowns."},
        HTTP_HX_REQUEST="true",
    )
    html = response.content.decode()
    assert response.status_code == 200 and "<html" not in html
    assert "Kaël counts out twelve silver crowns." in html and "Turn 4 appended" in html
    assert "Write turn 5 by hand" in html and 'id="save-current-turn" hx-swap-oob="true">4<' in html
    game_save.refresh_from_db()
    assert game_save.current_turn == 4
    event = Event.objects.get(game_save=game_save, turn_id=4)
    assert event.player_input == "I pay Mira."
    assert StateCache.objects.filter(game_save=game_save, turn_id=4).exists()
    assert Job.objects.filter(game_save=game_save, turn_id=4, kind=JobKind.EMBED_TURN).exists()


def test_append_turn_without_htmx_redirects_to_the_console(client, playtester, game_save):
    client.force_login(playtester)
    response = client.post(reverse("saves:turn_append", args=[game_save.save_id]), {"narrative": "Rain."})
    assert response.status_code == 302 and response["Location"] == game_save.get_absolute_url()
    assert Event.objects.get(game_save=game_save, turn_id=4).narrative == "Rain."


def test_append_turn_living_mode_queues_the_pipeline(client, playtester, game_save):
    game_save.memory_mode = MemoryMode.LIVING
    game_save.save()
    client.force_login(playtester)
    client.post(reverse("saves:turn_append", args=[game_save.save_id]), {"narrative": "Rain."})
    kinds = set(Job.objects.filter(game_save=game_save, turn_id=4).values_list("kind", flat=True))
    assert kinds == {JobKind.EMBED_TURN, JobKind.LIVING_TURN}


def test_append_turn_rejects_an_empty_narrative(client, playtester, game_save):
    client.force_login(playtester)
    response = client.post(
        reverse("saves:turn_append", args=[game_save.save_id]), {"narrative": "   "}, HTTP_HX_REQUEST="true"
    )
    assert response.status_code == 200
    assert "errorlist" in response.content.decode()
    game_save.refresh_from_db()
    assert game_save.current_turn == 3 and not Event.objects.filter(turn_id=4).exists()


def test_append_turn_escapes_html(client, playtester, game_save):
    client.force_login(playtester)
    client.post(reverse("saves:turn_append", args=[game_save.save_id]), {"narrative": "<script>alert(1)</script>"})
    html = client.get(game_save.get_absolute_url()).content.decode()
    assert "<script>alert(1)</script>" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html


def _append_form(html: str) -> dict:
    """The hidden fields the console's append form sends (read from the page)."""
    import re

    return dict(re.findall(r'<input type="hidden" name="(expected_turn_id)" value="(\d+)">', html))


def test_console_form_carries_the_turn_it_appends(client, playtester, game_save):
    client.force_login(playtester)
    assert _append_form(client.get(game_save.get_absolute_url()).content.decode()) == {"expected_turn_id": "4"}
    fragment = client.get(game_save.get_absolute_url(), HTTP_HX_REQUEST="true").content.decode()
    assert _append_form(fragment) == {"expected_turn_id": "4"}


@pytest.mark.parametrize("htmx", [False, True])
def test_a_double_submitted_append_appends_one_turn(client, playtester, game_save, htmx):
    client.force_login(playtester)
    form = _append_form(client.get(game_save.get_absolute_url()).content.decode())
    data = {**form, "player_input": "I pay Mira.", "narrative": "Kaël counts out twelve crowns."}
    headers = {"HTTP_HX_REQUEST": "true"} if htmx else {}
    url = reverse("saves:turn_append", args=[game_save.save_id])
    first = client.post(url, data, **headers)
    second = client.post(url, data, **headers)
    assert first.status_code == (200 if htmx else 302)
    assert list(Event.objects.filter(game_save=game_save).values_list("turn_id", flat=True)) == [1, 2, 3, 4]
    assert Job.objects.filter(game_save=game_save, kind=JobKind.EMBED_TURN).count() == 1
    if htmx:
        html = second.content.decode()
    else:
        assert second.status_code == 302
        html = client.get(second["Location"]).content.decode()
    assert "Turn 4 was already appended with this text" in html and "not appended again" in html
    assert _append_form(html) == {"expected_turn_id": "5"}


def test_an_append_against_a_turn_someone_else_played_keeps_the_text(client, playtester, game_save):
    from studio.saves.services import turn_append

    client.force_login(playtester)
    form = _append_form(client.get(game_save.get_absolute_url()).content.decode())
    turn_append(game_save=game_save, player_input="", narrative="Another playtester's turn.")
    response = client.post(
        reverse("saves:turn_append", args=[game_save.save_id]),
        {**form, "narrative": "My own turn."},
        HTTP_HX_REQUEST="true",
    )
    html = response.content.decode()
    assert response.status_code == 200
    assert "moved on since this page was loaded; nothing was appended" in html
    assert "My own turn." in html and "Another playtester&#x27;s turn." in html
    assert _append_form(html) == {"expected_turn_id": "5"}
    assert Event.objects.filter(game_save=game_save).count() == 4

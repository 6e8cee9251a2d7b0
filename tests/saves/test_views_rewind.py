"""Rewind from the web (pick -> preview -> confirm -> summary) and fork."""

from __future__ import annotations

import pytest
from django.urls import reverse

from studio.memory.facts import Fact, insert_facts
from studio.memory.mental_models import upsert_mental_model
from studio.memory.models import Fact as FactRow
from studio.memory.models import MentalModel as MentalModelRow
from studio.memory.models import Observation as ObservationRow
from studio.memory.observations import apply_consolidation
from studio.world.models import Event, Save

pytestmark = pytest.mark.django_db


@pytest.fixture
def living_save(game_save):
    """Turns 1-3 each with a fact; a belief created at 1 and updated at 3; a model at 3; one born at 3."""
    fact_ids = {}
    for turn in (1, 2, 3):
        fact_ids[turn] = insert_facts(
            game_save.save_id, turn, [Fact(f"Kaël owes Mira {turn} crowns.", entities=["Kaël"])]
        )[0]
    apply_consolidation(
        game_save.save_id,
        1,
        [{"kind": "CREATE", "statement": "Kaël owes Mira money.", "subject": "Kaël", "source_fact_ids": [fact_ids[1]]}],
        {fact_ids[1]: 1},
    )
    belief = ObservationRow.objects.get(game_save=game_save)
    apply_consolidation(
        game_save.save_id,
        3,
        [
            {
                "kind": "UPDATE",
                "observation_id": belief.pk,
                "statement": "Kaël owes Mira a fortune.",
                "subject": "Kaël",
                "source_fact_ids": [fact_ids[3]],
            },
            {
                "kind": "CREATE",
                "statement": "Mira distrusts Kaël.",
                "subject": "Mira",
                "source_fact_ids": [fact_ids[3]],
            },
        ],
        {fact_ids[3]: 3},
    )
    upsert_mental_model(game_save.save_id, "Kaël", "A debtor.", 1, [belief.pk])
    upsert_mental_model(game_save.save_id, "Kaël", "A deep debtor.", 3, [belief.pk])
    upsert_mental_model(game_save.save_id, "Mira", "A creditor.", 3, [])
    return game_save


def test_rewind_page_requires_nothing_but_shows_both_forms(client, playtester, game_save):
    client.force_login(playtester)
    html = client.get(reverse("saves:rewind", args=[game_save.save_id]), {"turn": 1}).content.decode()
    assert 'id="rewind-pick"' in html and 'id="fork-form"' in html and 'value="1"' in html


def test_preview_lists_what_goes_and_what_changes(client, playtester, living_save):
    client.force_login(playtester)
    url = reverse("saves:rewind_preview", args=[living_save.save_id])
    fragment = client.get(url, {"turn": 1}, HTTP_HX_REQUEST="true")
    html = fragment.content.decode()
    assert fragment.status_code == 200 and "<html" not in html and html.lstrip().startswith('<div id="rewind-preview">')
    assert 'data-kind="events">2<' in html and 'data-kind="facts">2<' in html
    assert "<del>Mira distrusts Kaël.</del>" in html  # created at 3: deleted
    assert (
        "Kaël owes Mira a fortune." in html and "Kaël owes Mira money." in html
    )  # rolled back to its turn-1 statement
    assert "A debtor." in html  # the mental model's turn-1 version comes back
    assert 'id="rewind-confirm"' in html
    page = client.get(url, {"turn": 1})
    assert "<html" in page.content.decode() and 'id="rewind-confirm"' in page.content.decode()
    # Nothing changed.
    living_save.refresh_from_db()
    assert living_save.current_turn == 3 and FactRow.objects.filter(game_save=living_save).count() == 3


def test_preview_refuses_a_turn_at_or_after_the_current_one(client, playtester, game_save):
    client.force_login(playtester)
    html = client.get(
        reverse("saves:rewind_preview", args=[game_save.save_id]), {"turn": 3}, HTTP_HX_REQUEST="true"
    ).content.decode()
    assert "pick a turn before it" in html and 'id="rewind-confirm"' not in html


def test_confirm_rewinds_and_shows_the_summary(client, playtester, living_save):
    client.force_login(playtester)
    url = reverse("saves:rewind_confirm", args=[living_save.save_id])
    response = client.post(url, {"turn": 1, "from_turn": 3, "confirm": "yes"}, HTTP_HX_REQUEST="true")
    html = response.content.decode()
    assert response.status_code == 200 and 'id="rewind-summary"' in html and "Rewound to turn 1" in html
    assert 'data-kind="events">2<' in html and 'data-kind="beliefs_deleted">1<' in html
    living_save.refresh_from_db()
    assert living_save.current_turn == 1 and living_save.timeline_generation == 1
    assert list(Event.objects.filter(game_save=living_save).values_list("turn_id", flat=True)) == [1]
    assert ObservationRow.objects.get(game_save=living_save).statement == "Kaël owes Mira money."
    assert MentalModelRow.objects.get(game_save=living_save).summary == "A debtor."
    # The summary page shows the same (kept in the session), full page and fragment.
    summary_url = reverse("saves:rewind_summary", args=[living_save.save_id])
    assert "Rewound to turn 1" in client.get(summary_url).content.decode()
    assert "Rewound to turn 1" in client.get(summary_url, HTTP_HX_REQUEST="true").content.decode()


def test_confirm_without_htmx_redirects_to_the_summary(client, playtester, game_save):
    client.force_login(playtester)
    response = client.post(
        reverse("saves:rewind_confirm", args=[game_save.save_id]), {"turn": 2, "from_turn": 3, "confirm": "yes"}
    )
    assert response.status_code == 302 and response["Location"] == reverse(
        "saves:rewind_summary", args=[game_save.save_id]
    )
    game_save.refresh_from_db()
    assert game_save.current_turn == 2


def test_confirm_needs_the_checkbox(client, playtester, game_save):
    client.force_login(playtester)
    html = client.post(
        reverse("saves:rewind_confirm", args=[game_save.save_id]), {"turn": 1, "from_turn": 3}, HTTP_HX_REQUEST="true"
    ).content.decode()
    assert "Confirm the rewind" in html
    game_save.refresh_from_db()
    assert game_save.current_turn == 3


def test_confirm_refuses_when_the_save_moved_on_since_the_preview(client, playtester, game_save):
    Event.objects.create(game_save=game_save, turn_id=4, narrative="A new turn meanwhile.")
    game_save.current_turn = 4
    game_save.save()
    client.force_login(playtester)
    html = client.post(
        reverse("saves:rewind_confirm", args=[game_save.save_id]),
        {"turn": 1, "from_turn": 3, "confirm": "yes"},
        HTTP_HX_REQUEST="true",
    ).content.decode()
    assert "changed since the preview" in html and 'id="rewind-confirm"' in html
    game_save.refresh_from_db()
    assert game_save.current_turn == 4


def test_fork_creates_a_copy_at_turn_n_and_redirects(client, playtester, living_save):
    client.force_login(playtester)
    url = reverse("saves:fork", args=[living_save.save_id])
    response = client.post(url, {"turn": 2, "name": "What if"}, HTTP_HX_REQUEST="true")
    fork = Save.objects.get(name="What if")
    assert response.status_code == 204 and response["HX-Redirect"] == fork.get_absolute_url()
    assert fork.forked_from == living_save and fork.current_turn == 2
    assert list(Event.objects.filter(game_save=fork).values_list("turn_id", flat=True)) == [1, 2]
    assert FactRow.objects.filter(game_save=fork).count() == 2
    living_save.refresh_from_db()
    assert living_save.current_turn == 3  # the original is untouched
    plain = client.post(url, {"turn": 3})
    assert plain.status_code == 302
    assert Save.objects.filter(forked_from=living_save).count() == 2


def test_fork_refuses_a_turn_after_the_current_one(client, playtester, game_save):
    client.force_login(playtester)
    html = client.post(
        reverse("saves:fork", args=[game_save.save_id]), {"turn": 9}, HTTP_HX_REQUEST="true"
    ).content.decode()
    assert html.lstrip().startswith("<form") and "only reaches turn 3" in html
    assert Save.objects.count() == 1


def test_confirm_fragment_swaps_the_header_turn_and_the_pickers_out_of_band(client, playtester, living_save):
    """The summary fragment carries the header's turn, the picker's range and the fork form's
    bounds as out-of-band swaps: the page shows turn 1 without a reload (issue 15, fresh state)."""
    client.force_login(playtester)
    url = reverse("saves:rewind_confirm", args=[living_save.save_id])
    html = client.post(url, {"turn": 1, "from_turn": 3, "confirm": "yes"}, HTTP_HX_REQUEST="true").content.decode()
    assert '<strong id="save-current-turn" hx-swap-oob="true">1</strong>' in html
    pick = html[html.index('id="rewind-pick"') :]
    pick = pick[: pick.index("</form>")]
    assert 'hx-swap-oob="true"' in pick and "Rewind to turn (0 – 0)" in pick and 'max="0"' in pick
    fork = html[html.index('id="fork-form"') :]
    fork = fork[: fork.index("</form>")]
    assert 'hx-swap-oob="true"' in fork and 'max="1"' in fork and 'value="1"' in fork
    # The full page (no htmx) has no out-of-band markup: it is fresh by construction.
    page = client.get(reverse("saves:rewind_summary", args=[living_save.save_id])).content.decode()
    assert "hx-swap-oob" not in page and "Rewind to turn (0 – 0)" in page


def test_a_refused_confirm_also_refreshes_the_turn_shown(client, playtester, game_save):
    Event.objects.create(game_save=game_save, turn_id=4, narrative="A new turn meanwhile.")
    game_save.current_turn = 4
    game_save.save()
    client.force_login(playtester)
    html = client.post(
        reverse("saves:rewind_confirm", args=[game_save.save_id]),
        {"turn": 1, "from_turn": 3, "confirm": "yes"},
        HTTP_HX_REQUEST="true",
    ).content.decode()
    assert '<strong id="save-current-turn" hx-swap-oob="true">4</strong>' in html
    assert "Rewind to turn (0 – 3)" in html

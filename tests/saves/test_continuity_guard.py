"""The continuity guard in play: findings beside the draft, regenerate with them as instructions, accept anyway,
"regenerate once", the API's narrate and the guard turned off. The narratives are scripted (tests/llm_server.py):
these tests are about what the studio records and sends, not about a model."""

from __future__ import annotations

import pytest
from django.urls import reverse

from studio.memory.continuity.findings import REGENERATE_HEADING
from studio.memory.continuity.models import ContinuityFinding
from studio.saves.models import NarratorDraft
from studio.world.models import Save, UniverseMeta
from studio.saves.services import turn_append
from tests.llm_server import Reply, operation_of, user_prompt

pytestmark = pytest.mark.django_db

HX = {"HTTP_HX_REQUEST": "true"}
LEAK = 'Mira leans in. "The ledger hides the smugglers\' debts under the chapel floor."'
CLEAN = "Mira shrugs and looks at the rain."


@pytest.fixture
def harbour(cast, narrator):
    save = Save.objects.create(universe=cast, name="Harbour run", save_id="harbourrun")
    turn_append(
        game_save=save,
        player_input="I wait on the quay.",
        narrative="Mira waits with you.",
        state={"present": ["Mira", "Ash"], "location": "harbour"},
    )
    save.refresh_from_db()
    return save


@pytest.fixture
def tester(client, playtester):
    client.force_login(playtester)
    return client


def url(name, save, *args):
    return reverse(f"saves:{name}", args=[save.save_id, *args])


def narrate(tester, save, text, player_input="Mira, what do you know?"):
    tester.post(url("narrate", save), {"player_input": player_input, "mode": "story"}, **HX)
    draft = NarratorDraft.objects.filter(game_save=save).latest("pk")
    return draft


def stream(tester, save, draft, number):
    return b"".join(tester.post(url("narrator_stream", save, draft.pk, number)).streaming_content).decode()


def narrate_requests(narrator):
    return [r for r in narrator.server.requests if operation_of(r) == "narrate"]


def test_a_leak_shows_beside_the_draft_regenerate_sends_it_and_accepting_anyway_records_it(tester, harbour, narrator):
    narrator.reply = Reply(content=LEAK)
    draft = narrate(tester, harbour, LEAK)
    stream(tester, harbour, draft, 1)
    [finding] = ContinuityFinding.objects.filter(game_save=harbour, draft_id=draft.pk, alternative=1)
    assert (finding.kind, finding.character, finding.item_label, finding.turn_id) == ("leak", "Mira", "lore ledger", 2)
    panel = tester.get(url("narrator_draft", harbour, draft.pk), **HX).content.decode()
    assert 'id="continuity-findings"' in panel and "lore ledger" in panel and "Mira does not know" in panel
    assert 'id="continuity-regenerate"' in panel and "Accept anyway as turn 2" in panel

    narrator.reply = Reply(content=CLEAN)
    tester.post(url("narrator_regenerate", harbour, draft.pk), {"with_findings": "1", "number": "1"}, **HX)
    finding.refresh_from_db()
    assert (finding.resolution, finding.regenerated_as) == ("regenerated", 2)
    stream(tester, harbour, draft, 2)
    sent = user_prompt(narrate_requests(narrator)[-1])
    assert REGENERATE_HEADING in sent and "Mira does not know the secret “The Ledger”" in sent
    assert "The ledger hides" not in sent.split(REGENERATE_HEADING)[1]  # the secret's words are never repeated
    assert not ContinuityFinding.objects.filter(game_save=harbour, draft_id=draft.pk, alternative=2).exists()
    panel = tester.get(url("narrator_draft", harbour, draft.pk), **HX).content.decode()
    assert 'id="continuity-asked"' in panel and "Accept as turn 2" in panel

    # The playtester goes back to the first alternative and accepts it anyway: recorded with the turn.
    tester.post(url("narrator_choose", harbour, draft.pk), {"number": "1"}, **HX)
    tester.post(url("narrator_accept", harbour, draft.pk), {"number": "1"}, **HX)
    finding.refresh_from_db()
    assert finding.resolution == "accepted" and Save.objects.get(pk=harbour.pk).current_turn == 2
    page = tester.get(url("turn_detail", harbour, 2)).content.decode()
    assert 'id="turn-findings"' in page and "Accepted anyway" in page and "lore ledger" in page
    health = tester.get(reverse("universes:lore_health", args=[harbour.universe.slug]) + f"?save={harbour.save_id}")
    assert "Continuity findings accepted anyway" in health.content.decode() and "turn 2" in health.content.decode()


def test_an_edit_that_removes_the_leak_is_recorded_as_fixed(tester, harbour, narrator):
    narrator.reply = Reply(content=LEAK)
    draft = narrate(tester, harbour, LEAK)
    stream(tester, harbour, draft, 1)
    tester.post(url("narrator_accept", harbour, draft.pk), {"number": "1", "narrative": CLEAN}, **HX)
    assert list(ContinuityFinding.objects.filter(game_save=harbour).values_list("resolution", flat=True)) == ["edited"]


def test_regenerate_once_narrates_again_with_the_findings_and_only_once(tester, harbour, narrator):
    UniverseMeta.objects.create(universe=harbour.universe, key="continuity_guard", value="regenerate")
    narrator.reply = Reply(content=LEAK)  # the model leaks again: the guard does not ask a third time
    draft = narrate(tester, harbour, LEAK)
    stream(tester, harbour, draft, 1)
    draft = NarratorDraft.objects.get(pk=draft.pk)
    assert draft.alternatives.count() == 2 and draft.chosen_number == 2
    stream(tester, harbour, draft, 2)
    assert REGENERATE_HEADING in user_prompt(narrate_requests(narrator)[-1])
    assert NarratorDraft.objects.get(pk=draft.pk).alternatives.count() == 2
    assert list(
        ContinuityFinding.objects.filter(game_save=harbour)
        .order_by("alternative")
        .values_list("alternative", "resolution")
    ) == [(1, "regenerated"), (2, "")]


def test_the_guard_off_checks_nothing(tester, harbour, narrator):
    UniverseMeta.objects.create(universe=harbour.universe, key="continuity_guard", value="off")
    narrator.reply = Reply(content=LEAK)
    draft = narrate(tester, harbour, LEAK)
    stream(tester, harbour, draft, 1)
    assert not ContinuityFinding.objects.exists()
    assert 'id="continuity-findings"' not in tester.get(url("narrator_draft", harbour, draft.pk), **HX).content.decode()


def test_the_api_narrate_returns_the_findings_and_regenerates_once(harbour, narrator, make_api, playtester):
    api = make_api(playtester)
    narrator.reply = Reply(content=LEAK)
    body = api.post(f"/api/v1/saves/{harbour.save_id}/narrate", {"player_input": "Mira?"}).json()
    assert body["continuity"]["mode"] == "warn" and body["continuity"]["regenerated_from"] is None
    assert [(f["kind"], f["character"], f["item"]["label"]) for f in body["continuity"]["findings"]] == [
        ("leak", "Mira", "lore ledger")
    ]
    UniverseMeta.objects.create(universe=harbour.universe, key="continuity_guard", value="regenerate")
    body = api.post(f"/api/v1/saves/{harbour.save_id}/narrate", {"player_input": "Mira?"}).json()
    assert body["continuity"]["regenerated_from"]["narrative"] == LEAK
    assert REGENERATE_HEADING in user_prompt(narrate_requests(narrator)[-1])
    assert not ContinuityFinding.objects.exists()  # the API stores nothing: the engine appends its own turn


def test_without_javascript_regenerate_once_writes_both_alternatives(tester, harbour, narrator):
    UniverseMeta.objects.create(universe=harbour.universe, key="continuity_guard", value="regenerate")
    narrator.reply = Reply(content=LEAK)
    tester.post(url("narrate", harbour), {"player_input": "Mira, what do you know?", "mode": "story"})  # no htmx
    draft = NarratorDraft.objects.filter(game_save=harbour).latest("pk")
    assert [(a.number, a.status) for a in draft.alternatives.order_by("number")] == [(1, "done"), (2, "done")]

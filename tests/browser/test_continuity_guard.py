"""The continuity guard in a real browser: a draft with a seeded leak shows its finding beside it, "regenerate"
sends the finding to the model (the scripted server records the request), and "accept anyway" records it with the
turn. The narratives come from the scripted OpenAI-compatible server (tests/llm_server.py); nothing here is a model."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from studio.memory.continuity.findings import REGENERATE_HEADING
from studio.memory.continuity.models import ContinuityFinding
from studio.world.models import Event, Save
from studio.saves.services import turn_append
from tests.llm_server import Reply, ScriptedLLMServer, operation_of, user_prompt

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

LEAK = 'Mira leans in. "The ledger hides the smugglers\' debts under the chapel floor."'
CLEAN = "Mira shrugs and watches the rain on the quay."


@pytest.fixture
def narrator_server(settings, eager, vector_memory):
    script = {"reply": Reply(content=LEAK, chunk_delay=0.02)}
    server = ScriptedLLMServer(
        lambda request: script["reply"] if operation_of(request) == "narrate" else Reply(status=400)
    ).start()
    settings.AXIOM_LLM_BASE_URL = server.base_url
    settings.AXIOM_LLM_MODEL = "test-model"
    settings.AXIOM_LLM_MAX_RETRIES = 0
    settings.AXIOM_LLM_TIMEOUT = 10
    server.script = script
    yield server
    server.stop()


@pytest.fixture
def harbour(cast, narrator_server):
    save = Save.objects.create(universe=cast, name="Harbour run", save_id="harbourbrowser")
    turn_append(
        game_save=save,
        player_input="I wait on the quay.",
        narrative="Mira waits with you.",
        state={"present": ["Mira", "Ash"], "location": "harbour"},
    )
    save.refresh_from_db()
    return save


def test_a_seeded_leak_shows_regenerate_sends_it_accept_anyway_records_it(
    logged_in_page, playtester, harbour, narrator_server
):
    page = logged_in_page(playtester)
    page.goto(harbour.get_absolute_url())
    page.fill("#narrate-input", "Mira, what do you know about the ledger?")
    page.click("#narrate-form button[type=submit]")
    findings = page.locator("#continuity-findings")
    expect(findings).to_contain_text("Mira does not know lore ledger")
    expect(findings.locator(".finding-sentence")).to_contain_text("The ledger hides the smugglers")
    expect(page.locator("#narrator-accept-button")).to_have_text("Accept anyway as turn 2")

    narrator_server.script["reply"] = Reply(content=CLEAN, chunk_delay=0.02)
    asked = len([r for r in narrator_server.requests if operation_of(r) == "narrate"])
    page.click("#continuity-regenerate")
    expect(page.locator("#narration")).to_contain_text("watches the rain")
    expect(page.locator("#narration")).to_have_attribute("data-status", "done")
    expect(page.locator("#continuity-asked")).to_be_visible()
    sent = [r for r in narrator_server.requests if operation_of(r) == "narrate"][asked:]
    assert len(sent) == 1 and REGENERATE_HEADING in user_prompt(sent[0])
    assert "Mira does not know the secret “The Ledger”" in user_prompt(sent[0])

    # Back to the first alternative, and accepted anyway: the finding stays with the turn.
    page.click("#draft-previous")
    expect(page.locator("#narrator-accept-button")).to_have_text("Accept anyway as turn 2")
    page.click("#narrator-accept-button")
    expect(page.locator("#console-turns li[data-turn='2']")).to_contain_text("The ledger hides")
    assert Event.objects.get(game_save=harbour, turn_id=2).narrative == LEAK
    assert list(ContinuityFinding.objects.filter(game_save=harbour, turn_id=2).values_list("kind", "resolution")) == [
        ("leak", "accepted")
    ]
    page.goto(f"/saves/{harbour.save_id}/turns/2/")
    expect(page.locator("#turn-findings")).to_contain_text("Accepted anyway")

"""Every text that reaches a page is escaped.

A `<script>` payload goes into each user- or model-supplied field (universe, meta, lore,
save, narrative, player input, state, facts, beliefs and their history, mental models,
job errors, LLM call errors, API token names); then every studio page that takes GET is
fetched as the owner and as staff, full page and htmx fragment, and the raw payload must
never appear.
"""

from __future__ import annotations

import pytest
from django.db import transaction

from studio.api.services import api_token_create
from studio.memory.models import Fact, Job, LLMCall, MentalModel, Observation, RecordedQuery
from studio.world.models import Event, LoreEntry, StateCache, UniverseMeta
from studio.universes.models import LoreRevision

from tests.support.routes import RULES, routes, url_for

PAYLOAD = '<script>alert("pwned")</script>'
ATTR_PAYLOAD = '"><img src=x onerror=alert(1)>'


@pytest.fixture
def poisoned(universe, game_save, author):
    universe.name = f"World {PAYLOAD}"
    universe.description = f"About {PAYLOAD}"
    universe.save()
    UniverseMeta.objects.create(universe=universe, key=f"note{ATTR_PAYLOAD}"[:200], value=PAYLOAD)
    # An old one-value persona, so the Metadata page shows the split it read.
    UniverseMeta.objects.create(universe=universe, key="player_character", value=f"Ilya Voss, {PAYLOAD} {ATTR_PAYLOAD}")
    UniverseMeta.objects.update_or_create(
        universe=universe, key="belief_missions", defaults={"value": '{"Kaël": "%s"}' % PAYLOAD.replace('"', "'")}
    )
    kael = LoreEntry.objects.get(universe=universe, entry_id="kael")
    kael.title = f"Kaël {PAYLOAD}"
    kael.text = f"Text {PAYLOAD} {ATTR_PAYLOAD}"
    kael.keys = [PAYLOAD]
    kael.embedding_error = PAYLOAD
    kael.save()
    revision = LoreRevision.objects.create(
        universe=universe,
        lore_entry=kael,
        entry_id="kael",
        action="update",
        before={"title": PAYLOAD, "text": PAYLOAD, "kind": "character", "keys": [PAYLOAD]},
        after={"title": PAYLOAD, "text": PAYLOAD, "kind": "character", "keys": []},
        author=author,
    )
    game_save.name = f"Run {PAYLOAD}"
    game_save.save()
    Event.objects.filter(game_save=game_save, turn_id=1).update(
        player_input=PAYLOAD, narrative=f"Narrative {PAYLOAD} {ATTR_PAYLOAD}"
    )
    StateCache.objects.create(game_save=game_save, turn_id=1, state={"where": PAYLOAD})
    fact = Fact.objects.create(
        game_save=game_save,
        turn_id=1,
        statement=f"Fact {PAYLOAD}",
        who=PAYLOAD,
        entities=[PAYLOAD, "Kaël"],
        fact_type="world",
    )
    belief = Observation.objects.create(
        game_save=game_save,
        statement=f"Belief {PAYLOAD}",
        subject=PAYLOAD,
        sources=[{"fact_id": fact.pk, "turn_id": 1}],
        history=[{"action": "CREATE", "statement": PAYLOAD, "turn_id": 1, "subject": PAYLOAD}],
        created_turn_id=1,
        updated_turn_id=1,
    )
    MentalModel.objects.create(
        game_save=game_save,
        subject=PAYLOAD,
        summary=f"Model {PAYLOAD}",
        sources=[belief.pk],
        created_turn_id=1,
        updated_turn_id=1,
        versions=[{"turn_id": 1, "summary": PAYLOAD, "sources": [belief.pk]}],
    )
    job = Job.objects.create(
        kind="living_turn", game_save=game_save, turn_id=1, status="failed", error=PAYLOAD, progress=PAYLOAD
    )
    LLMCall.objects.create(
        game_save=game_save, job=job, operation="extract", model=PAYLOAD, error=PAYLOAD, request=PAYLOAD, answer=PAYLOAD
    )
    RecordedQuery.objects.create(game_save=game_save, turn_id=1, query_text=PAYLOAD, params={"k": 5}, result_ids=[])
    token, _ = api_token_create(user=author, name=PAYLOAD)
    from studio.saves.models import NarratorAlternative, NarratorDraft, NarratorSnapshot

    NarratorSnapshot.objects.create(
        game_save=game_save,
        turn_id=1,
        player_input=PAYLOAD,
        proposed=PAYLOAD,
        edited=True,
        model=PAYLOAD,
        system_prompt=PAYLOAD,
        user_prompt=PAYLOAD,
        context={
            "items": [
                {"layer": "lore", "text": PAYLOAD, "tokens": 1, "reason": PAYLOAD, "included": False, "cut": PAYLOAD}
            ]
        },
    )
    draft = NarratorDraft.objects.create(game_save=game_save, turn_id=game_save.current_turn + 1, player_input=PAYLOAD)
    NarratorAlternative.objects.create(draft=draft, number=1, status="done", text=f"Story {PAYLOAD}", model=PAYLOAD)
    NarratorAlternative.objects.create(draft=draft, number=2, status="failed", text=PAYLOAD, error=PAYLOAD)
    from studio.memory.chapters.models import Chapter
    from studio.memory.knowledge.models import Reveal

    chapter = Chapter.objects.create(
        game_save=game_save,
        first_turn=1,
        last_turn=1,
        closed_turn=1,
        close_reason="playtester",
        summary=f"Summary {PAYLOAD}",
        summary_status="done",
    )
    reveal = Reveal.objects.create(game_save=game_save, turn_id=1, entry_id="kael", character=PAYLOAD)
    from django.utils import timezone

    from studio.saves.memory_tests.models import MemoryTestResult
    from studio.universes.memory_tests.services import memory_test_create

    memory_test_create(
        universe=universe,
        data={
            "name": "poisoned",
            "kind": "knows",
            "character": f"Mira {ATTR_PAYLOAD}",
            "fact": PAYLOAD,
            "description": PAYLOAD,
        },
    )
    MemoryTestResult.objects.create(
        game_save=game_save,
        turn_id=1,
        name="poisoned",
        kind="knows",
        verdict="fail",
        definition={"name": "poisoned", "kind": "knows", "character": PAYLOAD, "fact": PAYLOAD},
        summary=PAYLOAD,
        explain=[{"record": PAYLOAD, PAYLOAD: PAYLOAD}],
        ran_at=timezone.now(),
    )
    return {
        "test_name": "poisoned",
        "draft_id": draft.pk,
        "number": 1,
        "chapter_id": chapter.pk,
        "name": "Kaël",
        "reveal_id": reveal.pk,
        "slug": universe.slug,
        "save_id": game_save.save_id,
        "entry_id": "kael",
        "pk": UniverseMeta.objects.get(universe=universe, key="belief_mission").pk,
        "revision_id": revision.pk,
        "turn_id": 1,
        "observation_id": belief.pk,
        "job_id": job.pk,
        "token_id": token.pk,
    }


@pytest.mark.parametrize("who", ["author", "staff_user"])
def test_no_page_renders_a_payload_unescaped(client, poisoned, who, request, monkeypatch):
    monkeypatch.setattr("django.db.transaction.on_commit", lambda func, using=None, robust=False: None)
    client.force_login(request.getfixturevalue(who))
    checked = 0
    leaks = []
    for route, name, pattern in routes():
        if RULES[name][0] == "-":
            continue
        path = url_for(route, pattern, poisoned)
        for headers in ({}, {"HTTP_HX_REQUEST": "true"}):
            with transaction.atomic():
                response = client.get(path, {"q": PAYLOAD, "query": PAYLOAD, "entity": PAYLOAD}, **headers)
                transaction.set_rollback(True)
            if response.status_code != 200 or "html" not in response.get("Content-Type", ""):
                continue
            body = response.content.decode()
            checked += 1
            if PAYLOAD in body or "<img src=x onerror" in body:
                leaks.append(f"{path} {'(htmx)' if headers else ''}")
    assert checked >= 40
    assert not leaks, "unescaped payload on: " + ", ".join(leaks)


def test_payload_is_shown_escaped_not_dropped(client, poisoned, author):
    client.force_login(author)
    body = client.get(f"/saves/{poisoned['save_id']}/timeline/").content.decode()
    assert "&lt;script&gt;alert(" in body

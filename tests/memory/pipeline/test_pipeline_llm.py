"""The living pipeline passes the player character to every operation and records truncation."""

from __future__ import annotations

import json

import pytest

from studio.memory.models import Fact, Job, JobKind, JobStatus, Observation
from studio.world.models import MemoryMode, UniverseMeta
from studio.saves.services import save_create, turn_append
from tests.llm_server import Reply, json_reply, operation_of, user_prompt

pytestmark = pytest.mark.django_db


def _living_save(universe, capture):
    with capture(execute=True):
        return save_create(universe=universe, name="Living run", memory_mode=MemoryMode.LIVING)


def _append(capture, save, narrative):
    with capture(execute=True):
        return turn_append(game_save=save, player_input="look", narrative=narrative)


def test_player_character_reaches_every_operation_and_you_becomes_them(
    living_universe, eager_jobs, fake_vectors, llm_server, django_capture_on_commit_callbacks
):
    UniverseMeta.objects.create(universe=living_universe, key="player_character", value="Wren Halloway")
    llm_server.responder = lambda request: {
        "extract": json_reply(
            {
                "facts": [
                    {
                        "statement": "You find the note.",
                        "fact_type": "event",
                        "who": "you",
                        "what": "finds the note",
                        "where": "your location",
                        "entities": ["you"],
                    }
                ]
            }
        ),
        "consolidate": json_reply(
            {
                "actions": [
                    {
                        "action": "CREATE",
                        "subject": "Wren Halloway",
                        "statement": "Wren found Hesper's note.",
                        "source_fact_ids": [1],
                    },
                    {
                        "action": "CREATE",
                        "subject": "you",
                        "statement": "You keep the note to yourself.",
                        "source_fact_ids": [1],
                    },
                ]
            }
        ),
        "reflect": Reply(content="Wren Halloway is looking for Hesper."),
    }.get(operation_of(request), Reply(status=400))
    save = _living_save(living_universe, django_capture_on_commit_callbacks)
    _append(django_capture_on_commit_callbacks, save, "You unfold the note on the table.")

    job = Job.objects.get(game_save=save, kind=JobKind.LIVING_TURN)
    assert job.status == JobStatus.DONE, job.error
    for operation in ("extract", "consolidate", "reflect"):
        (request,) = llm_server.requests_for(operation)
        system = next(m["content"] for m in request["messages"] if m["role"] == "system")
        assert "Wren Halloway" in system + user_prompt(request), operation
    fact = Fact.objects.get(game_save=save)
    assert fact.who == "Wren Halloway"
    assert "you" not in [e.casefold() for e in fact.entities]
    assert fact.where == ""  # "your location" is a placeholder, never a place
    beliefs = Observation.objects.filter(game_save=save).order_by("id")
    assert [b.subject for b in beliefs] == ["Wren Halloway", "Wren Halloway"]  # "you" is the player character
    assert job.result["mental_models"] == ["Wren Halloway"]


def test_a_truncated_extraction_keeps_complete_facts_and_says_so_on_the_job(
    living_universe, eager_jobs, fake_vectors, llm_server, django_capture_on_commit_callbacks
):
    complete = {"statement": "Kaël paid the harbour master.", "fact_type": "event", "who": "Kaël", "entities": ["Kaël"]}
    cut = json.dumps({"facts": [complete, {"statement": "Kaël spat at the Gu"}]})
    cut = cut[: cut.index("Gu") + 2]  # the answer stops mid-string at the token limit
    llm_server.responder = lambda request: {
        "extract": Reply(content=cut, finish_reason="length"),
        "consolidate": json_reply({"actions": []}),
        "reflect": Reply(content=""),
    }.get(operation_of(request), Reply(status=400))
    save = _living_save(living_universe, django_capture_on_commit_callbacks)
    _append(django_capture_on_commit_callbacks, save, "Kaël pays the harbour master and spits at the Guild.")

    job = Job.objects.get(game_save=save, kind=JobKind.LIVING_TURN)
    assert job.status == JobStatus.DONE, job.error
    assert list(Fact.objects.filter(game_save=save).values_list("statement", flat=True)) == [complete["statement"]]
    (record,) = job.result["truncated"]
    assert record["operation"] == "extract"


def test_consolidation_is_shown_only_beliefs_the_turn_can_bear_on(
    living_universe, eager_jobs, fake_vectors, llm_server, django_capture_on_commit_callbacks
):
    """Beliefs about the characters the turn's facts name and about the world; not the
    belief about a character the turn never mentions."""
    save = _living_save(living_universe, django_capture_on_commit_callbacks)
    Observation.objects.create(
        game_save=save, subject="Hesper Vale", statement="Hesper Vale's kettle is cold.", created_turn_id=0
    )
    Observation.objects.create(
        game_save=save, subject="Corvin Tull", statement="Corvin Tull keeps accounts.", created_turn_id=0
    )
    Observation.objects.create(game_save=save, subject="", statement="The tide is low.", created_turn_id=0)
    llm_server.responder = lambda request: {
        "extract": json_reply(
            {
                "facts": [
                    {
                        "statement": "Corvin Tull lends a helm.",
                        "fact_type": "event",
                        "who": "Corvin Tull",
                        "entities": ["Corvin Tull"],
                    }
                ]
            }
        ),
        "consolidate": json_reply({"actions": []}),
    }.get(operation_of(request), Reply(content="A summary."))
    _append(django_capture_on_commit_callbacks, save, "Corvin Tull lends you a helm.")
    (request,) = [r for r in llm_server.requests if operation_of(r) == "consolidate"]
    prompt = user_prompt(request)
    assert "Corvin Tull keeps accounts." in prompt and "The tide is low." in prompt
    assert "Hesper" not in prompt


def test_an_old_name_plus_description_persona_reaches_the_operations_as_the_name_only(
    living_universe, eager_jobs, fake_vectors, llm_server, django_capture_on_commit_callbacks
):
    legacy = "Ilya Voss, a young lighthouse-keeper's apprentice who can hear glass sing"
    llm_server.responder = lambda request: {
        "extract": json_reply(
            {
                "facts": [
                    {"statement": "You nod.", "fact_type": "event", "who": "you", "what": "nods", "entities": ["you"]}
                ]
            }
        ),
        "consolidate": json_reply(
            {
                "actions": [
                    {"action": "CREATE", "subject": "you", "statement": "You agree to go.", "source_fact_ids": [1]}
                ]
            }
        ),
    }.get(operation_of(request), Reply(status=400))
    save = _living_save(living_universe, django_capture_on_commit_callbacks)
    save.meta = {**save.meta, "player_character": legacy}  # a save copied before personas existed
    save.save(update_fields=["meta"])
    _append(django_capture_on_commit_callbacks, save, "You nod at the keeper.")

    job = Job.objects.get(game_save=save, kind=JobKind.LIVING_TURN)
    assert job.status == JobStatus.DONE, job.error
    for operation in ("extract", "consolidate"):  # one belief: no mental model yet
        (request,) = llm_server.requests_for(operation)
        prompt = " ".join(m["content"] for m in request["messages"])
        assert "Ilya Voss" in prompt and "glass sing" not in prompt, operation
    fact = Fact.objects.get(game_save=save)
    assert fact.who == "Ilya Voss" and "glass" not in fact.statement + " ".join(fact.entities)
    assert list(Observation.objects.filter(game_save=save).values_list("subject", flat=True)) == ["Ilya Voss"]

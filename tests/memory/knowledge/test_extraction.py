"""Living mode: the extractor names who is present and who told whom, in the same call as the facts."""

from __future__ import annotations

import pytest

from studio.memory.knowledge.extract import Scene, extend_schema, parse_scene
from studio.memory.knowledge.models import Presence, Reveal
from studio.memory.models import Fact, Job, JobKind, JobStatus
from studio.memory.factextract import fact_schema
from studio.world.models import LoreEntry, MemoryMode
from studio.saves.services import save_create, turn_append
from tests.llm_server import Reply, json_reply, operation_of, user_prompt

pytestmark = pytest.mark.django_db


def test_parse_scene_keeps_known_names_and_matches_told_facts_by_statement():
    scene = Scene(characters=["Mira", "Kael", "Ivo"])
    answer = (
        '{"present": ["mira", "Kael", "a stranger"], "facts": ['
        '{"statement": "The bell is cracked."},'
        '{"statement": "Ivo hid the map.", "told_by": "Kael", "told_to": ["Mira", "Kael", "Bob"]}]}'
    )
    parse_scene(answer, scene, ["Ivo hid the map.", "The bell is cracked."])
    assert scene.present == ["Mira", "Kael"]  # invented names are dropped
    assert scene.told == {0: ("Kael", ["Mira"])}  # the speaker is not a listener
    schema = extend_schema(fact_schema(4))
    assert "present" in schema["properties"] and "told_to" in schema["properties"]["facts"]["items"]["properties"]
    assert "present" not in schema["required"]


def test_the_living_turn_records_presence_and_reveals(
    living_universe, eager_jobs, fake_vectors, llm_server, django_capture_on_commit_callbacks
):
    LoreEntry.objects.create(universe=living_universe, entry_id="mira-k", title="Mira", kind="character")
    llm_server.responder = lambda request: {
        "extract": json_reply(
            {
                "present": ["Mira", "Kaël"],
                "facts": [
                    {
                        "statement": "Kaël hid the ledger in the chapel.",
                        "fact_type": "event",
                        "who": "Kaël",
                        "what": "hid",
                        "when": "",
                        "where": "",
                        "why": "",
                        "entities": ["Kaël"],
                        "told_by": "Kaël",
                        "told_to": ["Mira"],
                    }
                ],
            }
        ),
        "consolidate": json_reply({"actions": []}),
        "reflect": Reply(content="x"),
    }.get(operation_of(request), Reply(status=400))
    with django_capture_on_commit_callbacks(execute=True):
        save = save_create(universe=living_universe, name="Living", memory_mode=MemoryMode.LIVING)
    with django_capture_on_commit_callbacks(execute=True):
        turn_append(game_save=save, player_input="listen", narrative="Kaël leans in and tells Mira about the ledger.")
    job = Job.objects.get(game_save=save, kind=JobKind.LIVING_TURN)
    assert job.status == JobStatus.DONE, job.error
    (request,) = llm_server.requests_for("extract")
    assert "Known characters:" in user_prompt(request) and "told_by" in user_prompt(request)
    presence = Presence.objects.get(game_save=save)
    assert (presence.turn_id, sorted(presence.characters), presence.source) == (1, ["Kaël", "Mira"], "extractor")
    reveal = Reveal.objects.get(game_save=save)
    assert (reveal.fact_id, reveal.character, reveal.told_by, reveal.source) == (
        Fact.objects.get(game_save=save).pk,
        "Mira",
        "Kaël",
        "extractor",
    )


def test_a_told_fact_records_one_reveal_per_listener_reading_the_characters_once(
    living, no_runner, fake_vectors, monkeypatch
):
    from studio.memory.facts import Fact as FactRecord, insert_facts
    from studio.memory.knowledge import names
    from studio.memory.pipeline.living import record_scene

    turn_append(game_save=living, player_input="a", narrative="Kael talks.", state={"present": ["Kael"]})
    (fact_id,) = insert_facts(living, 1, [FactRecord("Kael hid the map.")])
    reads = []
    real = names.character_index
    monkeypatch.setattr(names, "character_index", lambda *a, **k: reads.append(1) or real(*a, **k))
    monkeypatch.setattr("studio.memory.knowledge.reveals.character_index", names.character_index)
    monkeypatch.setattr("studio.memory.pipeline.living.character_index", names.character_index)
    scene = Scene(characters=["Mira", "Kael", "Ivo"], told={0: ("Kael", ["Mira", "Ivo", "the captain"])})
    record_scene(living, 1, scene, [fact_id], reextract=False)
    rows = Reveal.objects.filter(game_save=living).order_by("id")
    assert [(r.character, r.told_by, r.fact_id) for r in rows] == [
        ("Mira", "Kael", fact_id),
        ("Ivo", "Kael", fact_id),
        ("Mira", "Kael", fact_id),
    ]
    assert len(reads) == 1  # the universe's characters, once for the scene (not once per listener)

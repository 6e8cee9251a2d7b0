"""The rewind race of issue 19, as an engine sees it: append turns 1-3, rewind to 2 at once.

`play_then_rewind` drives the API the way the report did (three appends, then a rewind with
`expected_current_turn: 3`) while the save's runner is still busy: the model holds turn 1's
fact extraction until the rewind is done, so turn 2's and 3's jobs are still queued and turn
1's living job is running when the rewind lands, on any runner (the in-process pool, a
Celery worker). `assert_kept_turns_remembered` then checks what a user relies on: each kept
turn's exact text is found by `/query`, its facts exist, and nothing of turn 3 was written.
"""

from __future__ import annotations

import re
import threading
import time

from tests.llm_server import Reply, json_reply, operation_of, scripted_pipeline_responder, user_prompt

TURNS = {
    1: "Kaël pays the ferryman at the Iron Gate with a silver ring.",
    2: "Mirela sells Kaël a lantern of green glass in the night market.",
    3: "A storm floods the lower market and Kaël loses the lantern.",
}
KEPT = (1, 2)


def fact_for(narrative: str) -> str:
    return f"Witnessed: {narrative}"


def narrative_facts_responder(hold: threading.Event | None = None):
    """Answer each extraction with one fact quoting the turn's narrative (so facts name their
    turn); hold the first extraction until `hold` is set."""
    good = scripted_pipeline_responder()
    held = {"done": hold is None}
    lock = threading.Lock()

    def respond(request: dict) -> Reply:
        if operation_of(request) != "extract":
            return good(request)
        match = re.search(r"Passage:\n<<<\n(.*?)\n>>>", user_prompt(request), re.S)
        narrative = match.group(1) if match else "?"
        facts = [{"statement": fact_for(narrative), "fact_type": "event", "who": "Kaël", "entities": ["Kaël"]}]
        reply = json_reply({"facts": facts})
        with lock:
            if not held["done"]:
                held["done"] = True
                reply.hold = hold
        return reply

    return respond


def queue_turns(capture, save, narratives):
    """Append turns without running their jobs (they wait as behind a busy worker); return
    the turn ids."""
    from studio.saves.services import turn_append

    with capture(execute=False):
        return [turn_append(game_save=save, player_input="go", narrative=text).turn_id for text in narratives]


def drain(save):
    """Run every queued job of the save (the scope's runner drains it)."""
    from studio.memory import jobs
    from studio.memory.models import Job, JobStatus

    queued = Job.objects.filter(game_save=save, status=JobStatus.QUEUED).order_by("id").first()
    if queued is not None:
        jobs.run_job(queued.pk)


def facts_by_turn(save):
    from studio.memory.models import Fact

    return sorted(Fact.objects.filter(game_save=save).values_list("turn_id", "statement"))


def engine_api(user):
    """An API client with a fresh token of `user`."""
    from studio.api.services import api_token_create
    from tests.plugins.api import ApiClient

    return ApiClient(api_token_create(user=user, name="engine")[1])


def live_pool(settings, monkeypatch, llm_server):
    """Run jobs on the in-process pool (no Redis, not eager) with an in-memory vector store,
    the model answering each extraction with a fact of its turn and holding the first one;
    return (vectors, hold): set `hold` to release that extraction."""
    from tests.fakes import make_vector_memory

    settings.REDIS_URL = ""
    settings.AXIOM_JOBS_EAGER = False
    vectors = make_vector_memory()
    monkeypatch.setattr("studio.memory.vector.get_vector_memory", lambda: vectors)
    hold = threading.Event()
    llm_server.responder = narrative_facts_responder(hold)
    return vectors, hold


def wait_idle(save, timeout: float = 120) -> None:
    from studio.memory.models import Job, JobStatus

    deadline = time.monotonic() + timeout
    busy = (JobStatus.QUEUED, JobStatus.RUNNING)
    while time.monotonic() < deadline:
        if not Job.objects.filter(game_save=save, status__in=busy).exists():
            return
        time.sleep(0.1)
    raise AssertionError(f"jobs still busy: {list(Job.objects.filter(game_save=save, status__in=busy).values())}")


def play_while_held(api, save, llm) -> None:
    """Append turns 1-3 through the API while the model holds turn 1's fact extraction: turn
    1's living job is running, turns 2-3 wait behind it."""
    turns = f"/api/v1/saves/{save.save_id}/turns"
    response = api.post(turns, {"player_input": "go", "narrative": TURNS[1], "turn_id": 1})
    assert response.status_code == 201, response.content
    # Turn 1's living job is running now: the model holds its extraction.
    assert llm.wait_for("extract", timeout=120), "turn 1's fact extraction never started"
    for turn in (2, 3):
        response = api.post(turns, {"player_input": "go", "narrative": TURNS[turn], "turn_id": turn})
        assert response.status_code == 201, response.content


def play_then_rewind(api, save, llm, hold: threading.Event) -> dict:
    """Append turns 1-3 through the API and rewind to 2 at once; return the rewind's body."""
    try:
        play_while_held(api, save, llm)
        response = api.post(f"/api/v1/saves/{save.save_id}/rewind", {"turn_id": 2, "expected_current_turn": 3})
        assert response.status_code == 200, response.content
    finally:
        hold.set()
    body = response.json()
    assert body["changed"] is True and body["save"]["current_turn"] == 2
    return body


def assert_kept_turns_remembered(api, save, vectors) -> None:
    """Every kept turn is found by /query with its exact text and has its facts; turn 3 left nothing."""
    from studio.memory.models import Job, JobKind, JobStatus

    statuses = {
        (kind, turn): status
        for kind, turn, status in Job.objects.filter(
            game_save=save, kind__in=(JobKind.EMBED_TURN, JobKind.LIVING_TURN)
        ).values_list("kind", "turn_id", "status")
    }
    for turn in KEPT:
        body = api.post(f"/api/v1/saves/{save.save_id}/query", {"query_text": TURNS[turn], "k": 3}).json()
        found = [(r["turn_id"], r["text"]) for r in body.get("results", [])]
        assert (turn, TURNS[turn]) in found, (turn, found, statuses)
    facts = api.get(f"/api/v1/saves/{save.save_id}/facts", {"limit": 100}).json()["items"]
    assert sorted((f["turn_id"], f["statement"]) for f in facts) == [(t, fact_for(TURNS[t])) for t in KEPT], statuses
    for turn in KEPT:
        assert statuses[(JobKind.EMBED_TURN, turn)] == JobStatus.DONE
        assert statuses[(JobKind.LIVING_TURN, turn)] == JobStatus.DONE
    assert statuses[(JobKind.EMBED_TURN, 3)] == JobStatus.SKIPPED
    assert statuses[(JobKind.LIVING_TURN, 3)] == JobStatus.SKIPPED
    narrative = [c for c in vectors.get_chunks(save.save_id) if c.get("chunk_type") == "narrative"]
    assert sorted(c["turn_id"] for c in narrative) == list(KEPT)  # turn 3 was never embedded

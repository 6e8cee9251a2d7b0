"""The OpenAI-compatible backend against the scripted HTTP server, and the call log / guard."""
from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.utils import timezone

from studio.memory import llm as llm_module
from studio.memory.llm import (
    LLMRequestRejected,
    LLMUnavailable,
    OpenAICompatibleBackend,
    SpendLimitExceeded,
    TrackedLLM,
    get_llm_backend,
    parse_json_payload,
    salvage_json_objects,
)
from studio.memory.models import Job, JobKind, LLMCall
from tests.llm_server import Reply, ScriptedLLMServer


@pytest.fixture
def server():
    srv = ScriptedLLMServer(lambda request: Reply(content="hello")).start()
    yield srv
    srv.stop()


def backend_for(server, **kwargs) -> OpenAICompatibleBackend:
    sleeps = []
    options = {"base_url": server.base_url, "model": "m", "max_retries": 2, "sleep": sleeps.append}
    options.update(kwargs)
    backend = OpenAICompatibleBackend(**options)
    backend.sleeps = sleeps
    return backend


def test_chat_sends_messages_model_and_limits(server):
    backend = backend_for(server, api_key="sk-test", max_tokens=77)
    response = backend.chat(system="S", prompt="P", operation="extract")
    assert response.text == "hello"
    assert (response.prompt_tokens, response.completion_tokens) == (10, 5)
    (request,) = server.requests
    assert request["_path"] == "/v1/chat/completions"
    assert request["messages"] == [{"role": "system", "content": "S"}, {"role": "user", "content": "P"}]
    assert request["model"] == "m" and request["max_tokens"] == 77
    assert request["_headers"]["Authorization"] == "Bearer sk-test"
    assert "response_format" not in request


def test_model_per_operation(server):
    backend = backend_for(server, operation_models={"reflect": "big-model", "extract": ""})
    backend.complete(system="", prompt="x", operation="reflect")
    backend.complete(system="", prompt="x", operation="extract")
    assert [r["model"] for r in server.requests] == ["big-model", "m"]


def test_get_llm_backend_reads_settings(settings):
    settings.AXIOM_LLM_BASE_URL = ""
    assert get_llm_backend() is None
    settings.AXIOM_LLM_BASE_URL = "http://127.0.0.1:9/v1/"
    settings.AXIOM_LLM_MODEL = "base"
    settings.AXIOM_LLM_MODEL_CONSOLIDATE = "judge"
    backend = get_llm_backend()
    assert backend.url == "http://127.0.0.1:9/v1/chat/completions"
    assert backend.model_for("consolidate") == "judge" and backend.model_for("extract") == "base"


@pytest.mark.parametrize("status", [429, 500, 503])
def test_transient_errors_are_retried_with_backoff(server, status):
    answers = iter([Reply(status=status), Reply(status=status), Reply(content="ok")])
    server.responder = lambda request: next(answers)
    backend = backend_for(server, backoff_base=0.5)
    assert backend.complete(system="", prompt="x") == "ok"
    assert len(server.requests) == 3
    assert backend.sleeps == [0.5, 1.0]


def test_retry_after_header_is_honoured(server):
    answers = iter([Reply(status=429, headers={"Retry-After": "3"}), Reply(content="ok")])
    server.responder = lambda request: next(answers)
    backend = backend_for(server, backoff_base=0.1)
    assert backend.complete(system="", prompt="x") == "ok"
    assert backend.sleeps == [3.0]


def test_gives_up_after_max_retries(server):
    server.responder = lambda request: Reply(status=502)
    backend = backend_for(server, max_retries=1)
    with pytest.raises(LLMUnavailable, match="HTTP 502"):
        backend.complete(system="", prompt="x")
    assert len(server.requests) == 2


def test_client_errors_are_not_retried(server):
    server.responder = lambda request: Reply(status=401)
    backend = backend_for(server)
    with pytest.raises(LLMRequestRejected, match="HTTP 401"):
        backend.complete(system="", prompt="x")
    assert len(server.requests) == 1 and backend.sleeps == []


def test_timeout_raises_unavailable(server):
    server.responder = lambda request: Reply(content="late", delay=1.0)
    backend = backend_for(server, timeout=0.2, max_retries=0)
    with pytest.raises(LLMUnavailable, match="timed out"):
        backend.complete(system="", prompt="x")


def test_unreachable_endpoint():
    backend = OpenAICompatibleBackend(base_url="http://127.0.0.1:1/v1", model="m", max_retries=0)
    with pytest.raises(LLMUnavailable, match="could not reach"):
        backend.complete(system="", prompt="x")


def test_malformed_response_body_is_unavailable(server):
    server.responder = lambda request: Reply(raw_body="<html>proxy error</html>")
    with pytest.raises(LLMUnavailable, match="malformed"):
        backend_for(server, max_retries=0).complete(system="", prompt="x")


def test_json_mode_is_sent_when_asked(server):
    backend_for(server, model="json-ok").complete(system="", prompt="x", json_mode=True)
    assert server.requests[0]["response_format"] == {"type": "json_object"}


def test_json_mode_falls_back_when_rejected_and_remembers():
    srv = ScriptedLLMServer(lambda request: Reply(content='{"facts": []}'), reject_json_mode=True).start()
    try:
        backend = backend_for(srv, model="no-json-model")
        assert backend.complete(system="", prompt="x", json_mode=True) == '{"facts": []}'
        assert backend.complete(system="", prompt="y", json_mode=True) == '{"facts": []}'
        sent = ["response_format" in r for r in srv.requests]
        assert sent == [True, False, False]  # refused once, then asked plainly from then on
    finally:
        srv.stop()
        llm_module._JSON_MODE_UNSUPPORTED.discard((srv.base_url, "no-json-model"))


def test_missing_usage_is_estimated(server):
    server.responder = lambda request: Reply(content="x" * 40, usage=None)
    response = backend_for(server).chat(system="", prompt="y")
    assert response.estimated_tokens and response.completion_tokens == 10


# -- TrackedLLM: the call log and the spend guard ------------------------------------------


@pytest.mark.django_db
def test_tracked_calls_are_logged_with_job_counters(server, game_save):
    job = Job.objects.create(kind=JobKind.LIVING_TURN, game_save=game_save, turn_id=1)
    tracked = TrackedLLM(backend_for(server), game_save_id=game_save.pk, job_id=job.pk)
    assert tracked.complete(system="", prompt="x", operation="extract") == "hello"
    call = LLMCall.objects.get()
    assert (call.operation, call.model, call.prompt_tokens, call.completion_tokens, call.error) == (
        "extract", "m", 10, 5, ""
    )
    assert call.job_id == job.pk and call.game_save_id == game_save.pk
    job.refresh_from_db()
    assert (job.llm_calls, job.llm_tokens) == (1, 15)


@pytest.mark.django_db
def test_failed_calls_are_logged_too(server, game_save):
    server.responder = lambda request: Reply(status=500)
    tracked = TrackedLLM(backend_for(server, max_retries=0), game_save_id=game_save.pk)
    with pytest.raises(LLMUnavailable):
        tracked.complete(system="", prompt="x", operation="reflect")
    call = LLMCall.objects.get()
    assert call.operation == "reflect" and "HTTP 500" in call.error
    assert isinstance(tracked.last_error("reflect"), LLMUnavailable)


@pytest.mark.django_db
def test_spend_guard_counts_only_the_last_hour_of_this_save(server, game_save, settings):
    settings.AXIOM_LLM_CALLS_PER_HOUR = 2
    old = LLMCall.objects.create(game_save=game_save, operation="extract")
    LLMCall.objects.filter(pk=old.pk).update(created_at=timezone.now() - timedelta(hours=2))
    tracked = TrackedLLM(backend_for(server), game_save_id=game_save.pk)
    tracked.complete(system="", prompt="1", operation="extract")
    tracked.complete(system="", prompt="2", operation="extract")
    with pytest.raises(SpendLimitExceeded) as info:
        tracked.complete(system="", prompt="3", operation="extract")
    assert "2 LLM calls in the last hour (cap 2)" in info.value.reason
    assert info.value.resume_at > timezone.now() + timedelta(minutes=59)
    assert len(server.requests) == 2  # the refused call never reached the endpoint


# -- parsing helpers -------------------------------------------------------------------------


def test_parse_json_payload_tolerates_fences_and_prose():
    assert parse_json_payload('```json\n{"a": 1}\n```') == {"a": 1}
    assert parse_json_payload('Sure! Here it is: {"a": [1, 2]} Hope that helps.') == {"a": [1, 2]}
    assert parse_json_payload("[1, 2]") == [1, 2]
    assert parse_json_payload("no json here") is None


def test_salvage_keeps_complete_objects_of_a_truncated_list():
    text = '{"facts": [{"statement": "A."}, {"statement": "B."}, {"statement": "C'
    assert salvage_json_objects(text) == [{"statement": "A."}, {"statement": "B."}]
    assert json.loads('{"x": 1}') == salvage_json_objects('{"x": 1}')[0]

"""The OpenAI-compatible backend against the scripted HTTP server, and the call log / guard."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.utils import timezone

from studio.memory import llm as llm_module
from studio.memory.llm import (
    CAPABILITIES,
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
    """Without a JSON wish nothing but the model, the messages and the limits is sent."""
    backend = backend_for(server, api_key="sk-test", max_tokens=77)
    response = backend.chat(system="S", prompt="P", operation="extract")
    assert response.text == "hello"
    assert (response.prompt_tokens, response.completion_tokens) == (10, 5)
    (request,) = server.requests
    assert request["_path"] == "/v1/chat/completions"
    assert request["messages"] == [{"role": "system", "content": "S"}, {"role": "user", "content": "P"}]
    assert request["model"] == "m" and request["max_tokens"] == 77
    assert request["_headers"]["Authorization"] == "Bearer sk-test"
    assert "response_format" not in request and "stream" not in request
    assert not set(request) & {"frequency_penalty", "presence_penalty", "repeat_penalty", "temperature"}
    assert response.finish_reason == "stop" and not response.truncated and response.mode == "text"


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
    settings.AXIOM_LLM_MODEL_NARRATE = "storyteller"
    settings.AXIOM_LLM_OPERATION_OPTIONS = {
        "extract": {"temperature": 0.0, "max_tokens": 2048, "timeout": 300.0, "repeat_penalty": 1.05},
        "narrate": {"temperature": 0.9, "frequency_penalty": 0.3},
    }
    backend = get_llm_backend()
    assert backend.url == "http://127.0.0.1:9/v1/chat/completions"
    assert backend.model_for("consolidate") == "judge" and backend.model_for("extract") == "base"
    assert backend.model_for("narrate") == "storyteller"
    extract = backend.options_for("extract")
    assert (extract.max_tokens, extract.timeout, extract.repeat_penalty) == (2048, 300.0, 1.05)
    assert backend.options_for("narrate").sampling() == {"temperature": 0.9, "frequency_penalty": 0.3}
    assert backend.options_for("reflect").sampling() == {}


def test_settings_read_per_operation_variables(monkeypatch):
    """The settings module turns AXIOM_LLM_<SETTING>_<OPERATION> into the options table."""
    import importlib

    import studio.settings as settings_module

    monkeypatch.setenv("AXIOM_LLM_MAX_TOKENS_EXTRACT", "2048")
    monkeypatch.setenv("AXIOM_LLM_TIMEOUT_EXTRACT", "300")
    monkeypatch.setenv("AXIOM_LLM_REPEAT_PENALTY_EXTRACT", "1.1")
    monkeypatch.setenv("AXIOM_LLM_TEMPERATURE_NARRATE", "0.95")
    monkeypatch.setenv("AXIOM_LLM_MODEL_NARRATE", "storyteller")
    try:
        reloaded = importlib.reload(settings_module)
        table = reloaded.AXIOM_LLM_OPERATION_OPTIONS
        assert table["extract"]["max_tokens"] == 2048 and table["extract"]["timeout"] == 300.0
        assert table["extract"]["repeat_penalty"] == 1.1 and table["extract"]["temperature"] == 0.0
        assert table["narrate"]["temperature"] == 0.95 and reloaded.AXIOM_LLM_MODEL_NARRATE == "storyteller"
        assert table["consolidate"]["max_tokens"] is None and table["consolidate"]["frequency_penalty"] is None
    finally:
        monkeypatch.undo()
        importlib.reload(settings_module)


def test_operation_options_are_sent_only_when_set(server):
    backend = backend_for(
        server,
        max_tokens=500,
        operation_options={
            "extract": {"temperature": 0.0, "max_tokens": 2048, "repeat_penalty": 1.1},
            "narrate": {"temperature": 0.8, "frequency_penalty": 0.4, "presence_penalty": 0.2},
        },
    )
    backend.chat(system="", prompt="x", operation="extract")
    backend.chat(system="", prompt="x", operation="narrate")
    backend.chat(system="", prompt="x", operation="reflect")
    extract, narrate, reflect = server.requests
    assert (extract["temperature"], extract["max_tokens"], extract["repeat_penalty"]) == (0.0, 2048, 1.1)
    assert "frequency_penalty" not in extract and "presence_penalty" not in extract
    assert (narrate["temperature"], narrate["frequency_penalty"], narrate["presence_penalty"]) == (0.8, 0.4, 0.2)
    assert narrate["max_tokens"] == 500 and "repeat_penalty" not in narrate
    assert "temperature" not in reflect and reflect["max_tokens"] == 500


def test_a_timeout_per_operation_and_its_hint(server):
    server.responder = lambda request: Reply(content="late", delay=0.6)
    backend = backend_for(server, timeout=5, max_retries=0, operation_options={"extract": {"timeout": 0.2}})
    with pytest.raises(LLMUnavailable, match="AXIOM_LLM_TIMEOUT_EXTRACT"):
        backend.complete(system="", prompt="x", operation="extract")
    assert backend.complete(system="", prompt="x", operation="reflect") == "late"  # the global 5 s


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
        assert backend.sleeps == []  # a refusal is not an outage: no backoff
        assert CAPABILITIES.snapshot((srv.base_url, "no-json-model"))["refused_modes"] == ["json_object"]
    finally:
        srv.stop()


def test_a_new_server_on_a_reused_url_starts_with_a_clean_slate():
    srv = ScriptedLLMServer(lambda request: Reply(content="{}"))
    CAPABILITIES.refuse_mode((srv.base_url, "m"), "json_object")
    srv.start()
    try:
        backend_for(srv).complete(system="", prompt="x", json_mode=True)
        assert srv.requests[0]["response_format"] == {"type": "json_object"}
    finally:
        srv.stop()


def test_the_dead_llm_not_configured_error_is_gone():
    assert not hasattr(llm_module, "LLMNotConfigured")


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
        "extract",
        "m",
        10,
        5,
        "",
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


# -- truncation -------------------------------------------------------------------------------


def test_finish_reason_length_marks_the_response_truncated(server):
    server.responder = lambda request: Reply(content='{"facts": [{"statement": "A."}, {"sta', finish_reason="length")
    response = backend_for(server, max_tokens=64).chat(system="", prompt="x", operation="extract", json_mode=True)
    assert response.truncated and response.finish_reason == "length" and response.max_tokens == 64


@pytest.mark.django_db
def test_a_truncated_extraction_keeps_its_complete_facts_and_is_recorded(server, game_save):
    from studio.memory.factextract import extract_facts_detailed

    cut = json.dumps({"facts": [{"statement": "Wren found Hesper's note.", "who": "you", "entities": ["you"]}]})
    cut = cut[:-2] + ', {"statement": "Hesper went down the Reeve\'s St'
    server.responder = lambda request: Reply(
        content=cut, finish_reason="length", usage={"prompt_tokens": 300, "completion_tokens": 64}
    )
    tracked = TrackedLLM(backend_for(server, max_tokens=64), game_save_id=game_save.pk)
    facts, error = extract_facts_detailed(tracked, "You find the note.", player_character="Wren")
    assert error is None
    assert [(f.statement, f.who, f.entities) for f in facts] == [("Wren found Hesper's note.", "Wren", ["Wren"])]
    assert tracked.truncated == [{"operation": "extract", "max_tokens": 64, "completion_tokens": 64}]
    assert LLMCall.objects.get().error == ""  # a cut answer is not a failed call

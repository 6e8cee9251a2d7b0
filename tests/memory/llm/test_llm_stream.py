"""Streaming chat completions (server-sent events) against the project's test server.

Deltas, the final finish_reason and usage, a clean cancel that closes the HTTP stream, a
cut stream, refusals before the first delta, and the call log of a tracked stream.
"""

from __future__ import annotations

import json

import pytest

from studio.memory.llm import LLMUnavailable, OpenAICompatibleBackend, TrackedLLM
from studio.memory.models import LLMCall
from tests.llm_server import Reply, ScriptedLLMServer

STORY = "The tide turns. Brask lifts the lantern and the quay goes gold."


@pytest.fixture
def server():
    srv = ScriptedLLMServer(lambda request: Reply(content=STORY, usage={"prompt_tokens": 42, "completion_tokens": 13}))
    srv.start()
    yield srv
    srv.stop()


def backend_for(server, **kwargs) -> OpenAICompatibleBackend:
    options = {"base_url": server.base_url, "model": "m", "max_retries": 1, "sleep": lambda s: None}
    options.update(kwargs)
    return OpenAICompatibleBackend(**options)


def test_stream_yields_deltas_then_finish_reason_and_usage(server):
    backend = backend_for(server, operation_options={"narrate": {"temperature": 0.8}})
    stream = backend.stream(system="You narrate.", prompt="look around", operation="narrate")
    deltas = list(stream)
    assert len(deltas) > 5 and "".join(deltas) == STORY
    response = stream.response
    assert response.text == STORY and response.finish_reason == "stop" and not response.truncated
    assert (response.prompt_tokens, response.completion_tokens, response.estimated_tokens) == (42, 13, False)
    assert response.first_token_ms is not None and response.first_token_ms <= response.latency_ms
    (request,) = server.requests
    assert request["stream"] is True and request["stream_options"] == {"include_usage": True}
    assert request["temperature"] == 0.8
    assert server.settled_stream_log() == [{"deltas_sent": len(deltas), "disconnected": False, "completed": True}]


def test_closing_mid_stream_closes_the_http_stream(server):
    words = [f"word{i} " for i in range(200)]
    server.responder = lambda request: Reply(chunks=words, chunk_delay=0.02)
    stream = backend_for(server).stream(prompt="go", operation="narrate")
    received = [next(stream) for _ in range(3)]
    stream.close()
    assert received == words[:3]
    assert server.disconnected.wait(timeout=10), "the server never saw the reader leave"
    (entry,) = server.stream_log
    assert entry["disconnected"] and not entry["completed"] and entry["deltas_sent"] < len(words)
    assert stream.cancelled and stream.response.finish_reason == "cancelled"
    assert stream.response.text == "".join(words[:3])
    with pytest.raises(StopIteration):
        next(stream)
    stream.close()  # closing twice is harmless


def test_leaving_the_with_block_cancels(server):
    server.responder = lambda request: Reply(chunks=[f"w{i} " for i in range(200)], chunk_delay=0.02)
    with backend_for(server).stream(prompt="go", operation="narrate") as stream:
        next(stream)
    assert stream.cancelled
    assert server.disconnected.wait(timeout=10)


def test_a_stream_cut_at_the_token_limit_is_truncated(server):
    server.responder = lambda request: Reply(content="It was a dark and", finish_reason="length")
    stream = backend_for(server, max_tokens=5).stream(prompt="go", operation="narrate")
    assert "".join(stream) == "It was a dark and"
    assert stream.response.truncated and stream.response.max_tokens == 5


def test_an_error_after_some_deltas_raises_and_keeps_the_text(server):
    server.responder = lambda request: Reply(content=STORY, error_after=3)
    stream = backend_for(server).stream(prompt="go", operation="narrate")
    received = []
    with pytest.raises(LLMUnavailable, match="mid-stream"):
        for delta in stream:
            received.append(delta)
    assert len(received) == 3 and stream.text == "".join(received)
    assert stream.response.finish_reason == "error" and isinstance(stream.error, LLMUnavailable)


def test_a_stream_that_ends_unfinished_is_an_error(server):
    # Seen once on the shared local llama-cpp-python server: after 20 minutes in its queue the
    # stream closed with no text, no finish_reason and no [DONE]; an error, not an empty answer.
    server.responder = lambda request: Reply(content=STORY, end_after=4)
    stream = backend_for(server).stream(prompt="go", operation="narrate")
    with pytest.raises(LLMUnavailable, match="ended unfinished after"):
        list(stream)
    assert stream.response.finish_reason == "error" and len(stream.text) > 0


def test_a_server_that_refuses_stream_options_gets_them_dropped(server):
    srv = ScriptedLLMServer(lambda request: Reply(content=STORY), refuse_params={"stream_options"}).start()
    try:
        backend = backend_for(srv)
        stream = backend.stream(prompt="go", operation="narrate")
        assert "".join(stream) == STORY
        assert ["stream_options" in r for r in srv.requests] == [True, False]
        assert stream.response.estimated_tokens  # no usage chunk without include_usage
        assert stream.response.completion_tokens == len(STORY) // 4
        "".join(backend.stream(prompt="again", operation="narrate"))
        assert "stream_options" not in srv.requests[-1]
    finally:
        srv.stop()


def test_a_server_that_ignores_stream_true_is_read_whole(server):
    body = {
        "model": "m",
        "choices": [{"message": {"content": STORY}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 3, "completion_tokens": 4},
    }
    server.responder = lambda request: Reply(raw_body=json.dumps(body))
    stream = backend_for(server).stream(prompt="go", operation="narrate")
    assert list(stream) == [STORY] and stream.response.completion_tokens == 4


def test_retries_happen_before_the_first_delta(server):
    answers = iter([Reply(status=503), Reply(content=STORY)])
    server.responder = lambda request: next(answers)
    stream = backend_for(server).stream(prompt="go", operation="narrate")
    assert "".join(stream) == STORY and len(server.requests) == 2


def test_structured_fallbacks_happen_before_the_first_delta():
    srv = ScriptedLLMServer(
        lambda request: Reply(content='{"summary": "Brask waits."}'), refuse_json_schema=True
    ).start()
    try:
        schema = {"type": "object", "properties": {"summary": {"type": "string"}}, "required": ["summary"]}
        stream = backend_for(srv).stream(prompt="go", operation="reflect", schema=schema)
        assert "".join(stream) == '{"summary": "Brask waits."}'
        assert [r["response_format"]["type"] for r in srv.requests] == ["json_schema", "json_object"]
        assert srv.requests[1]["response_format"]["schema"] == schema
        assert stream.response.mode == "json_object_schema"
    finally:
        srv.stop()


@pytest.mark.django_db
def test_a_tracked_stream_is_logged_once_when_it_ends(server, game_save):
    tracked = TrackedLLM(backend_for(server), game_save_id=game_save.pk)
    stream = tracked.stream(system="S", prompt="P", operation="narrate")
    assert LLMCall.objects.count() == 0  # nothing logged before the end
    "".join(stream)
    call = LLMCall.objects.get()
    assert (call.operation, call.prompt_tokens, call.completion_tokens, call.error) == ("narrate", 42, 13, "")
    assert tracked.calls == 1 and tracked.tokens == 55


@pytest.mark.django_db
def test_a_cancelled_tracked_stream_is_logged_as_cancelled(server, game_save):
    server.responder = lambda request: Reply(chunks=[f"w{i} " for i in range(200)], chunk_delay=0.02)
    tracked = TrackedLLM(backend_for(server), game_save_id=game_save.pk)
    with tracked.stream(prompt="P", operation="narrate") as stream:
        next(stream)
        next(stream)
    call = LLMCall.objects.get()
    assert "cancelled by the reader after 6 characters" in call.error
    assert call.completion_tokens == 1  # estimated from what was read


@pytest.mark.django_db
def test_a_refused_tracked_stream_is_logged_as_failed(server, game_save):
    server.responder = lambda request: Reply(status=401)
    tracked = TrackedLLM(backend_for(server), game_save_id=game_save.pk)
    with pytest.raises(Exception, match="HTTP 401"):
        tracked.stream(prompt="P", operation="narrate")
    assert "HTTP 401" in LLMCall.objects.get().error


def test_stream_all_reads_a_chat_as_a_stream(server):
    backend = backend_for(server, stream_all=True)
    response = backend.chat(system="S", prompt="P", operation="extract", json_mode=True)
    assert response.text == STORY and response.completion_tokens == 13
    (request,) = server.requests
    assert request["stream"] is True and request["response_format"] == {"type": "json_object"}
    (entry,) = server.settled_stream_log()
    assert entry["completed"] and not entry["disconnected"]


def test_a_streamed_chat_that_times_out_closes_the_connection(server):
    server.responder = lambda request: Reply(chunks=["a ", "b ", "c "] + ["slow "] * 20, chunk_delay=0.4)
    backend = backend_for(server, stream_all=True, timeout=0.2, max_retries=0)
    with pytest.raises(LLMUnavailable, match="stalled"):
        backend.chat(system="", prompt="P", operation="extract")
    assert server.disconnected.wait(timeout=10)  # the server learns the reader left

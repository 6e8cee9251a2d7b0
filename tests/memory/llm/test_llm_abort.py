"""Ending a streamed request from another thread (`StreamAbort`, `abort_when`) against the test server.

The scripted server holds its answer back (as a CPU model server reading a long prompt does)
or pauses between deltas (a stall); the abort must end the request then, not at the next
delta, and the server must see the client leave.
"""

from __future__ import annotations

import threading

import pytest

from studio.memory.llm import AbortWatch, LLMCancelled, OpenAICompatibleBackend, StreamAbort, TrackedLLM, abort_when
from studio.memory.llm.relay import relay_open
from studio.memory.models import LLMCall
from tests.llm_server import Reply, ScriptedLLMServer


@pytest.fixture
def held():
    """An answer the server holds back until the test releases it (released at the end)."""
    release = threading.Event()
    srv = ScriptedLLMServer(lambda request: Reply(content="too late", hold=release)).start()
    srv.release = release
    yield srv
    release.set()
    srv.stop()


def backend_for(server, **kwargs) -> OpenAICompatibleBackend:
    return OpenAICompatibleBackend(base_url=server.base_url, model="m", max_retries=2, sleep=lambda s: None, **kwargs)


def abort_on_arrival(server, abort: StreamAbort) -> threading.Thread:
    """Flip `abort` from another thread once the server has the request."""

    def flip():
        assert server.wait_for("", timeout=10)
        abort.abort()

    thread = threading.Thread(target=flip)
    thread.start()
    return thread


def test_an_abort_before_the_first_byte_ends_the_request_and_is_never_retried(held):
    abort = StreamAbort()
    thread = abort_on_arrival(held, abort)
    with pytest.raises(LLMCancelled, match="before the answer began"):
        backend_for(held).stream(prompt="look around", abort=abort)
    thread.join()
    assert not held.release.is_set()  # the server never answered: the abort ended the wait
    assert held.disconnected.wait(5), "the server never saw the client leave"
    assert held.stream_log == [{"deltas_sent": 0, "disconnected": True, "completed": False}]
    assert len(held.requests) == 1  # a Stop is not an outage


def test_an_abort_in_a_stall_ends_the_stream_cancelled_with_its_text(held):
    held.responder = lambda request: Reply(chunks=["The tide ", "turns."], chunk_delay=60)
    abort = StreamAbort()
    stream = backend_for(held).stream(prompt="look around", abort=abort)
    assert held.stream_log[0]["deltas_sent"] == 0  # the answer began, its first delta is far off
    abort.abort()
    assert list(stream) == []  # no error: a Stop, not a broken stream
    assert stream.cancelled and stream.error is None and stream.response.finish_reason == "cancelled"
    assert held.disconnected.wait(5)


def test_an_unaborted_stream_on_its_own_connection_reads_to_the_end(held):
    held.responder = lambda request: Reply(content="The tide turns.")
    stream = backend_for(held).stream(prompt="look around", abort=StreamAbort())
    assert "".join(stream) == "The tide turns." and stream.response.finish_reason == "stop"


@pytest.mark.django_db(transaction=True)
def test_the_watcher_flips_the_switch_and_the_call_is_logged(held, game_save):
    checks = []

    def stopped():
        checks.append(threading.current_thread().name)
        if len(checks) == 1:
            raise RuntimeError("database busy")  # logged, asked again
        return bool(held.requests)

    tracked = TrackedLLM(backend_for(held), game_save_id=game_save.pk)
    with abort_when(stopped, every=0.05) as abort, pytest.raises(LLMCancelled):
        tracked.stream(prompt="look around", operation="narrate", abort=abort)
    assert abort.aborted and held.disconnected.wait(5)
    assert set(checks) == {"llm-stream-stop-watch"} and len(checks) >= 2
    assert not any(t.name == "llm-stream-stop-watch" for t in threading.enumerate())  # stopped with the block
    call = LLMCall.objects.get(game_save=game_save)
    assert "before the answer began" in call.error


def test_leaving_the_block_stops_the_watcher_at_once():
    checks = []
    with abort_when(lambda: checks.append(1) or False, every=30) as abort:
        pass
    assert not abort.aborted and checks == []
    assert not any(t.name == "llm-stream-stop-watch" for t in threading.enumerate())


def test_an_abort_while_a_relay_opens_ends_the_request_and_is_never_retried(held):
    """llama-cpp-python sends its headers only with the first token: opening the relay blocks meanwhile."""
    abort = StreamAbort()
    thread = abort_on_arrival(held, abort)
    with pytest.raises(LLMCancelled, match="before the answer began"):
        relay_open(backend_for(held), {"model": "m", "messages": [], "stream": True}, stream=True, abort=abort)
    thread.join()
    assert not held.release.is_set() and held.disconnected.wait(5)
    assert len(held.requests) == 1


def test_an_abort_in_a_relay_stall_ends_it_cancelled_with_no_error(held):
    held.responder = lambda request: Reply(chunks=["The tide ", "turns."], chunk_delay=60)
    abort = StreamAbort()
    relay = relay_open(backend_for(held), {"model": "m", "messages": [], "stream": True}, stream=True, abort=abort)
    assert next(relay).startswith(b": ping")  # the endpoint's bytes as sent
    abort.abort()
    list(relay)  # at most what had already arrived (the role chunk): the held words never come
    assert relay.text == "" and relay.cancelled and relay.error is None and relay.response.finish_reason == "cancelled"
    assert held.disconnected.wait(5)


def test_a_watch_started_and_stopped_apart_flips_once_and_ends_its_thread():
    calls = []
    watch = AbortWatch(lambda: calls.append(1) or len(calls) >= 2, every=0.01, name="test-watch").start()
    watch._thread.join(5)  # the thread ends by itself once it flipped the switch
    assert watch.abort.aborted and len(calls) == 2
    watch.stop()
    watch.stop()  # idempotent
    assert not any(t.name == "test-watch" for t in threading.enumerate())

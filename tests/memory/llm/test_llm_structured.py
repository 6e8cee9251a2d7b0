"""Structured outputs: the mode chain, refusals vs outages, what is remembered, dropped fields.

Against the project's OpenAI-compatible test server (tests/llm_server.py), configured to
refuse what real servers refuse. The answers are scripted; these tests are about the
requests the client sends and how it reads the refusals.
"""

from __future__ import annotations

import json

import pytest

from studio.memory.llm import CAPABILITIES, LLMRequestRejected, LLMUnavailable, OpenAICompatibleBackend
from studio.memory.llm.capabilities import EndpointCapabilities
from tests.llm_server import Reply, ScriptedLLMServer

SCHEMA = {
    "type": "object",
    "properties": {"facts": {"type": "array", "items": {"type": "string"}, "maxItems": 3}},
    "required": ["facts"],
    "additionalProperties": False,
}
ANSWER = '{"facts": ["A."]}'


@pytest.fixture
def make_server():
    servers = []

    def make(responder=None, **options) -> ScriptedLLMServer:
        server = ScriptedLLMServer(responder or (lambda request: Reply(content=ANSWER)), **options).start()
        servers.append(server)
        return server

    yield make
    for server in servers:
        server.stop()


def backend_for(server, **kwargs) -> OpenAICompatibleBackend:
    sleeps: list[float] = []
    options = {"base_url": server.base_url, "model": "m", "max_retries": 2, "sleep": sleeps.append}
    options.update(kwargs)
    backend = OpenAICompatibleBackend(**options)
    backend.sleeps = sleeps
    return backend


def kinds(server) -> list[str]:
    """The structured-output mode of each request the server received."""
    out = []
    for request in server.requests:
        fmt = request.get("response_format")
        if fmt is None:
            out.append("text")
        elif fmt["type"] == "json_object":
            out.append("json_object_schema" if "schema" in fmt else "json_object")
        else:
            out.append(fmt["type"])
    return out


def ask(backend, **kwargs):
    return backend.chat(system="SYS", prompt="P", operation="extract", schema=SCHEMA, schema_name="facts", **kwargs)


def test_a_schema_is_asked_as_json_schema_first(make_server):
    server = make_server()
    response = ask(backend_for(server))
    assert response.text == ANSWER and response.mode == "json_schema"
    fmt = server.requests[0]["response_format"]
    assert fmt == {"type": "json_schema", "json_schema": {"name": "facts", "schema": SCHEMA, "strict": True}}
    assert server.requests[0]["messages"][0] == {"role": "system", "content": "SYS"}  # schema not repeated


def test_llama_cpp_python_500_on_json_schema_is_a_refusal_and_remembered(make_server):
    server = make_server(refuse_json_schema=True)
    backend = backend_for(server, max_retries=0)
    first = ask(backend)
    second = ask(backend)
    assert kinds(server) == ["json_schema", "json_object_schema", "json_object_schema"]
    assert first.mode == second.mode == "json_object_schema"
    assert server.requests[1]["response_format"] == {"type": "json_object", "schema": SCHEMA}
    assert backend.sleeps == []  # a refusal, not an outage: no backoff
    known = CAPABILITIES.snapshot((server.base_url, "m"))
    assert known["refused_modes"] == ["json_schema"] and known["confirmed_modes"] == ["json_object_schema"]


def test_a_bare_500_on_an_unconfirmed_mode_is_checked_with_the_next_mode(make_server):
    # No body naming response_format: refusal or outage? The next mode decides.
    server = make_server(
        lambda r: (
            Reply(status=500)
            if (r.get("response_format") or {}).get("type") == "json_schema"
            else Reply(content=ANSWER)
        )
    )
    backend = backend_for(server, max_retries=0)  # even without retries the check is made
    assert ask(backend).mode == "json_object_schema"
    assert ask(backend).mode == "json_object_schema"
    assert kinds(server) == ["json_schema", "json_object_schema", "json_object_schema"]
    assert CAPABILITIES.snapshot((server.base_url, "m"))["refused_modes"] == ["json_schema"]


def test_500_on_both_modes_is_an_outage_not_a_refusal(make_server):
    server = make_server(lambda r: Reply(status=500))
    backend = backend_for(server, max_retries=2, backoff_base=0.5)
    with pytest.raises(LLMUnavailable, match="HTTP 500"):
        ask(backend)
    # the check of the next mode took the place of the first retry; then the first mode again
    assert kinds(server) == ["json_schema", "json_object_schema", "json_schema"]
    assert backend.sleeps == [1.0]
    assert CAPABILITIES.snapshot((server.base_url, "m"))["refused_modes"] == []  # nothing wrongly remembered
    # and when the server is back, json_schema is asked first again
    server.responder = lambda r: Reply(content=ANSWER)
    assert ask(backend).mode == "json_schema"


def test_an_outage_on_a_confirmed_mode_is_retried_without_fallback(make_server):
    server = make_server()
    backend = backend_for(server, max_retries=2)
    assert ask(backend).mode == "json_schema"
    answers = iter([Reply(status=503), Reply(status=503), Reply(content=ANSWER)])
    server.responder = lambda r: next(answers)
    assert ask(backend).mode == "json_schema"
    assert kinds(server) == ["json_schema"] * 4
    assert backend.sleeps == [0.5, 1.0]


def test_every_fallback_step_down_to_plain_text(make_server):
    # json_schema -> 500 (llama-cpp-python), json_object+schema -> 400, json_object -> 400: text.
    server = make_server(refuse_json_schema=True, reject_schema_in_json_object=True)
    server.responder = lambda r: (
        Reply(status=400) if (r.get("response_format") or {}).get("type") == "json_object" else Reply(content=ANSWER)
    )
    backend = backend_for(server)
    response = ask(backend)
    assert kinds(server) == ["json_schema", "json_object_schema", "json_object", "text"]
    assert response.mode == "text" and response.text == ANSWER
    system = server.requests[-1]["messages"][0]["content"]
    assert system.startswith("SYS") and json.dumps(SCHEMA) in system  # the schema travels in the prompt
    assert backend.sleeps == []
    ask(backend)
    assert kinds(server)[-1] == "text"  # remembered: straight to text next time
    assert len(server.requests) == 5


def test_json_object_without_schema_carries_the_schema_in_the_prompt(make_server):
    server = make_server(refuse_json_schema=True, reject_schema_in_json_object=True)
    ask(backend_for(server))
    assert kinds(server) == ["json_schema", "json_object_schema", "json_object"]
    assert json.dumps(SCHEMA) in server.requests[-1]["messages"][0]["content"]
    assert json.dumps(SCHEMA) not in server.requests[1]["messages"][0]["content"]


def test_remembered_per_endpoint_and_model(make_server):
    server = make_server(refuse_json_schema=True)
    ask(backend_for(server, model="small"))
    ask(backend_for(server, model="other"))
    assert kinds(server) == ["json_schema", "json_object_schema", "json_schema", "json_object_schema"]


def test_what_is_remembered_expires():
    now = [0.0]
    caps = EndpointCapabilities(ttl=60, clock=lambda: now[0])
    key = ("http://x/v1", "m")
    caps.refuse_mode(key, "json_schema")
    caps.refuse_fields(key, ["repeat_penalty"])
    assert caps.modes_to_try(key, ("json_schema", "json_object", "text")) == ["json_object", "text"]
    now[0] = 61
    assert caps.modes_to_try(key, ("json_schema", "json_object", "text")) == ["json_schema", "json_object", "text"]
    assert caps.refused_fields(key) == set()
    caps.refuse_mode(key, "text")  # plain text is the floor
    assert caps.modes_to_try(key, ("text",)) == ["text"]


def test_a_later_refusal_overrides_a_confirmation(make_server):
    server = make_server()
    backend = backend_for(server)
    ask(backend)  # json_schema confirmed
    server.refuse_json_schema = True  # the server was swapped for llama-cpp-python
    assert ask(backend).mode == "json_object_schema"
    known = CAPABILITIES.snapshot((server.base_url, "m"))
    assert known["refused_modes"] == ["json_schema"] and "json_schema" not in known["confirmed_modes"]


def test_context_length_errors_are_rejections_not_refusals(make_server):
    body = json.dumps(
        {"error": {"message": "This model's maximum context length is 4096 tokens.", "code": "context_length_exceeded"}}
    )
    server = make_server(lambda r: Reply(status=400, raw_body=body))
    with pytest.raises(LLMRequestRejected, match="maximum context length"):
        ask(backend_for(server))
    assert len(server.requests) == 1


@pytest.mark.parametrize("status", [400, 422])
def test_an_unknown_field_is_dropped_and_remembered(make_server, status):
    server = make_server(refuse_params={"repeat_penalty"}, refuse_params_status=status)
    backend = backend_for(
        server, operation_options={"extract": {"temperature": 0.1, "repeat_penalty": 1.1, "frequency_penalty": 0.2}}
    )
    first = ask(backend)
    ask(backend)
    sent = [("repeat_penalty" in r, r.get("frequency_penalty"), r.get("temperature")) for r in server.requests]
    assert sent == [(True, 0.2, 0.1), (False, 0.2, 0.1), (False, 0.2, 0.1)]
    assert first.dropped_params == ["repeat_penalty"] and first.mode == "json_schema"
    assert CAPABILITIES.snapshot((server.base_url, "m"))["refused_fields"] == ["repeat_penalty"]


def test_an_unexplained_400_on_plain_text_drops_the_optional_fields_once(make_server):
    server = make_server(lambda r: Reply(status=400) if "presence_penalty" in r else Reply(content="ok"))
    backend = backend_for(server, operation_options={"narrate": {"presence_penalty": 0.5, "temperature": 0.7}})
    assert backend.chat(system="", prompt="x", operation="narrate").text == "ok"
    assert ["presence_penalty" in r for r in server.requests] == [True, False]
    backend.chat(system="", prompt="x", operation="narrate")
    assert "presence_penalty" not in server.requests[-1]


def test_a_400_without_optional_fields_is_still_a_rejection(make_server):
    server = make_server(lambda r: Reply(status=400))
    with pytest.raises(LLMRequestRejected):
        backend_for(server).chat(system="", prompt="x", operation="reflect")
    assert len(server.requests) == 1


def test_an_operation_can_be_told_which_modes_to_use(make_server):
    # A server that accepts a mode but is slow with it (llama-cpp-python's schema grammar):
    # AXIOM_LLM_STRUCTURED_MODES_EXTRACT=json_object,text skips the schema modes for that
    # operation only, in the documented order whatever order the setting names them.
    server = make_server()
    backend = backend_for(server, operation_options={"extract": {"modes": "text,json_object"}})
    response = ask(backend)
    assert kinds(server) == ["json_object"] and response.mode == "json_object"
    assert json.dumps(SCHEMA) in server.requests[0]["messages"][0]["content"]  # the schema in the prompt
    backend.chat(system="SYS", prompt="P", operation="reflect", schema=SCHEMA, schema_name="facts")
    assert kinds(server)[-1] == "json_schema"  # other operations keep the whole chain


def test_a_mode_setting_never_empties_the_chain_and_rejects_unknown_names(make_server):
    from studio.memory.llm import OperationOptions
    from studio.memory.llm.capabilities import mode_chain

    assert mode_chain(schema=None, json_mode=True, allowed=("json_schema",)) == ("json_object", "text")
    with pytest.raises(ValueError, match="json_scheme"):
        OperationOptions.from_value({"modes": "json_scheme"})

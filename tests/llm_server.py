"""A small OpenAI-compatible chat-completions server for tests and benchmarks.

It listens on 127.0.0.1 (a free port), records every request, and answers from a script:
a responder function `(request_json) -> Reply` decides each answer, so a test can reply by
operation (recognised from the system prompt), fail with a status, stall, or hold a request
until the test releases it. Nothing here is a model: the replies are whatever the test
scripted, and tests assert on the prompts the studio sent.

    with ScriptedLLMServer(responder) as server:
        settings.AXIOM_LLM_BASE_URL = server.base_url

A fixture that makes the server the studio's model uses `serve_as_studio_model`, which
starts it, points the settings at it and stops it afterwards.

Besides plain JSON answers it behaves like the real servers the client must cope with:

- `stream: true` is answered with server-sent events (`data: {chunk}` lines, CRLF-separated
  as sse-starlette sends them, then `data: [DONE]`), the reply's text split into deltas
  (`Reply.chunks`, or word by word) with `Reply.chunk_delay` between them; the usage chunk
  comes only when `stream_options.include_usage` was asked. Every stream is logged in
  `stream_log` (deltas sent, whether the reader went away first); `disconnected` is set
  when a reader closes a stream early. While an answer is held back (`Reply.delay`,
  `Reply.hold`) or paused between deltas (`Reply.chunk_delay`) the server watches the
  connection and gives up as soon as the client leaves (logged as a disconnected stream).
- `refuse_json_schema=True` answers `response_format: {type: json_schema}` with HTTP 500 and
  an internal-server-error body, the way llama-cpp-python's server (0.3.x) does: its
  request model only knows `text` and `json_object` (with an optional `schema`). This is a
  hand-written reproduction of that behaviour, not a recording.
- `reject_json_mode=True` answers any `response_format` with HTTP 400 (servers without JSON
  mode); `reject_schema_in_json_object=True` answers `{type: json_object, schema: ...}` with 400.
- `refuse_params={"repeat_penalty", ...}` answers a request carrying one of those fields with
  HTTP 400 naming it, as OpenAI does for arguments it does not know
  (`refuse_params_status=422` gives a pydantic-style body instead).
- `Reply(finish_reason="length")` reports a truncated answer; its `content` is whatever cut
  text the test gives (see `cut_at`).
"""

from __future__ import annotations

import json
import re
import select
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable


@dataclass
class Reply:
    content: str = ""
    status: int = 200
    delay: float = 0.0
    hold: threading.Event | None = None  # wait until the test sets it
    raw_body: str | None = None  # send this body instead of a chat-completions JSON
    usage: dict | None = field(default_factory=lambda: {"prompt_tokens": 10, "completion_tokens": 5})
    headers: dict = field(default_factory=dict)
    finish_reason: str = "stop"
    chunks: list[str] | None = None  # the deltas of a streamed answer (default: word by word)
    chunk_delay: float = 0.0  # seconds between two streamed deltas
    error_after: int | None = None  # streamed: send an error event after this many deltas
    end_after: int | None = None  # streamed: end the body after this many deltas, unfinished


def cut_at(text: str, marker: str) -> str:
    """Return `text` up to (not including) `marker`: an answer cut by the token limit."""
    index = text.index(marker)
    return text[:index]


LLAMA_CPP_PYTHON_JSON_SCHEMA_ERROR = (
    "1 validation error for CreateChatCompletionRequest\nresponse_format.type\n  Input should be 'text' or "
    "'json_object' [type=literal_error, input_value='json_schema', input_type=str]"
)


def operation_of(request: dict) -> str:
    """Return "extract", "consolidate", "reflect", "narrate" (from the system prompt) or ""."""
    messages = request.get("messages") or []
    system = next((m.get("content", "") for m in messages if m.get("role") == "system"), "")
    if "You extract facts" in system:
        return "extract"
    if "You maintain the beliefs" in system:
        return "consolidate"
    if "You write the mental model" in system:
        return "reflect"
    if "narrator of an interactive story" in system:
        return "narrate"
    if "You summarize a part of an interactive story" in system:
        return "summarize"
    return ""


def user_prompt(request: dict) -> str:
    messages = request.get("messages") or []
    return next((m.get("content", "") for m in messages if m.get("role") == "user"), "")


def json_reply(payload) -> Reply:
    return Reply(content=json.dumps(payload))


class ScriptedLLMServer:
    def __init__(
        self,
        responder: Callable[[dict], Reply] | None = None,
        *,
        reject_json_mode: bool = False,
        refuse_json_schema: bool = False,
        reject_schema_in_json_object: bool = False,
        refuse_params: set[str] | None = None,
        refuse_params_status: int = 400,
    ):
        self.responder = responder or (lambda request: Reply(content="{}"))
        self.reject_json_mode = reject_json_mode
        self.refuse_json_schema = refuse_json_schema
        self.reject_schema_in_json_object = reject_schema_in_json_object
        self.refuse_params = set(refuse_params or ())
        self.refuse_params_status = refuse_params_status
        self.requests: list[dict] = []
        self.stream_log: list[dict] = []
        self.disconnected = threading.Event()
        self.lock = threading.Lock()
        self.arrived = threading.Condition(self.lock)
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            # TCP_NODELAY, as model servers set it: each small write of a stream leaves at once. Without it the
            # first event waited for the headers' ACK (Nagle against delayed ACK): ~40 ms before the first byte.
            disable_nagle_algorithm = True

            def log_message(self, *args):  # keep test output clean
                pass

            def do_POST(self):
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length)
                try:
                    request = json.loads(raw or b"{}")
                except ValueError:
                    request = {}
                request["_path"] = self.path
                request["_headers"] = dict(self.headers)
                with server.arrived:
                    server.requests.append(request)
                    server.arrived.notify_all()
                if not self.path.rstrip("/").endswith("/chat/completions"):
                    return self._send(404, json.dumps({"error": "not found"}))
                refusal = server.refusal(request)
                if refusal is not None:
                    return self._send(*refusal)
                reply = server.responder(request)
                if not server.hold_back(reply, self.connection):
                    # The client went away while the answer was held back (a Stop while the
                    # "model" reads the prompt): a real server stops here too.
                    if request.get("stream"):
                        with server.lock:
                            server.stream_log.append({"deltas_sent": 0, "disconnected": True, "completed": False})
                        server.disconnected.set()
                    self.close_connection = True
                    return
                if reply.raw_body is not None:
                    return self._send(reply.status, reply.raw_body, reply.headers)
                if reply.status != 200:
                    return self._send(
                        reply.status, json.dumps({"error": {"message": "scripted failure"}}), reply.headers
                    )
                if request.get("stream"):
                    return self._stream(request, reply)
                body = {
                    "id": "chatcmpl-test",
                    "object": "chat.completion",
                    "model": request.get("model", "test-model"),
                    "choices": [
                        {
                            "index": 0,
                            "message": {"role": "assistant", "content": reply.content},
                            "finish_reason": reply.finish_reason,
                        }
                    ],
                }
                if reply.usage is not None:
                    body["usage"] = reply.usage
                return self._send(200, json.dumps(body), reply.headers)

            def _stream(self, request: dict, reply: Reply):
                pieces = reply.chunks if reply.chunks is not None else re.findall(r"\S+\s*|\s+", reply.content)
                model = request.get("model", "test-model")
                include_usage = bool((request.get("stream_options") or {}).get("include_usage"))
                entry = {"deltas_sent": 0, "disconnected": False, "completed": False}
                with server.lock:
                    server.stream_log.append(entry)

                def chunk(delta: dict, finish_reason=None) -> dict:
                    return {
                        "id": "chatcmpl-test",
                        "object": "chat.completion.chunk",
                        "model": model,
                        "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
                    }

                def write(data: str) -> None:
                    raw = data.encode()
                    self.wfile.write(f"{len(raw):X}\r\n".encode() + raw + b"\r\n")
                    self.wfile.flush()

                try:
                    self.send_response(200)
                    self.send_header("Content-Type", "text/event-stream; charset=utf-8")
                    self.send_header("Cache-Control", "no-cache")
                    self.send_header("Transfer-Encoding", "chunked")
                    for key, value in reply.headers.items():
                        self.send_header(key, value)
                    self.end_headers()
                    write(": ping\r\n\r\n")
                    write("data: " + json.dumps(chunk({"role": "assistant", "content": ""})) + "\r\n\r\n")
                    for index, piece in enumerate(pieces):
                        if reply.error_after is not None and index >= reply.error_after:
                            write(
                                "data: "
                                + json.dumps({"error": {"message": "scripted mid-stream failure"}})
                                + "\r\n\r\n"
                            )
                            write("")  # end of the chunked body
                            entry["completed"] = True
                            return
                        if reply.end_after is not None and index >= reply.end_after:
                            write("")  # the body ends: no finish_reason, no [DONE]
                            entry["completed"] = True
                            return
                        if reply.chunk_delay and not _wait_watching(self.connection, reply.chunk_delay):
                            raise ConnectionAbortedError("the reader left during a pause")
                        write("data: " + json.dumps(chunk({"content": piece})) + "\r\n\r\n")
                        entry["deltas_sent"] += 1
                    write("data: " + json.dumps(chunk({}, reply.finish_reason)) + "\r\n\r\n")
                    if include_usage and reply.usage is not None:
                        usage_chunk = {
                            "id": "chatcmpl-test",
                            "object": "chat.completion.chunk",
                            "model": model,
                            "choices": [],
                            "usage": reply.usage,
                        }
                        write("data: " + json.dumps(usage_chunk) + "\r\n\r\n")
                    write("data: [DONE]\r\n\r\n")
                    write("")
                    entry["completed"] = True
                except (BrokenPipeError, ConnectionResetError, ConnectionAbortedError):
                    entry["disconnected"] = True
                    server.disconnected.set()
                    self.close_connection = True

            def _send(self, status: int, body: str, headers: dict | None = None):
                data = body.encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    for key, value in (headers or {}).items():
                        self.send_header(key, value)
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (a timeout test)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=lambda: self.httpd.serve_forever(poll_interval=0.05), daemon=True)

    @staticmethod
    def hold_back(reply: Reply, connection: socket.socket) -> bool:
        """Wait as `reply` says (`hold`, then `delay`), watching the client; False when it left meanwhile."""
        if reply.hold is not None and not _wait_watching(connection, 120, until=reply.hold):
            return False
        return _wait_watching(connection, reply.delay)

    def settled_stream_log(self, timeout: float = 5.0) -> list[dict]:
        """`stream_log` once every stream has ended (completed or the reader left).

        A reader may stop at `[DONE]` before the handler thread has written the body's last
        chunk and marked its entry; waiting here keeps tests from racing that thread.
        """
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.lock:
                if all(e["completed"] or e["disconnected"] for e in self.stream_log):
                    return [dict(e) for e in self.stream_log]
            time.sleep(0.01)
        with self.lock:
            return [dict(e) for e in self.stream_log]

    def refusal(self, request: dict) -> tuple[int, str] | None:
        """Return (status, body) when this server refuses the request's fields, else None."""
        response_format = request.get("response_format")
        if self.reject_json_mode and response_format is not None:
            return 400, json.dumps({"error": {"message": "response_format is not supported"}})
        if isinstance(response_format, dict):
            if self.refuse_json_schema and response_format.get("type") == "json_schema":
                return 500, json.dumps(
                    {
                        "error": {
                            "message": LLAMA_CPP_PYTHON_JSON_SCHEMA_ERROR,
                            "type": "internal_server_error",
                            "param": None,
                            "code": None,
                        }
                    }
                )
            if (
                self.reject_schema_in_json_object
                and response_format.get("type") == "json_object"
                and "schema" in response_format
            ):
                return 400, json.dumps({"error": {"message": "Unrecognized request argument supplied: schema"}})
        refused = sorted(name for name in self.refuse_params if name in request)
        if refused:
            if self.refuse_params_status == 422:
                detail = [
                    {"type": "extra_forbidden", "loc": ["body", name], "msg": "Extra inputs are not permitted"}
                    for name in refused
                ]
                return 422, json.dumps({"detail": detail})
            return self.refuse_params_status, json.dumps(
                {
                    "error": {
                        "message": f"Unrecognized request argument supplied: {refused[0]}",
                        "type": "invalid_request_error",
                        "param": None,
                        "code": None,
                    }
                }
            )
        return None

    @property
    def base_url(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host}:{port}/v1"

    def start(self) -> "ScriptedLLMServer":
        from studio.memory.llm.capabilities import CAPABILITIES

        # A new server may get the port of an earlier one: what the client remembered about
        # that URL was about another server.
        CAPABILITIES.forget(self.base_url)
        self.thread.start()
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def __enter__(self) -> "ScriptedLLMServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def requests_for(self, operation: str) -> list[dict]:
        with self.lock:
            return [r for r in self.requests if operation_of(r) == operation]

    def wait_for(self, operation: str, count: int = 1, timeout: float = 30) -> bool:
        """Block until `count` requests of `operation` arrived (True) or the timeout (False)."""
        deadline = time.monotonic() + timeout
        with self.arrived:
            while len([r for r in self.requests if operation_of(r) == operation]) < count:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self.arrived.wait(remaining)
        return True


def _wait_watching(connection: socket.socket, seconds: float, *, until: threading.Event | None = None) -> bool:
    """Wait `seconds` (or until `until` is set); False as soon as the client closed the connection."""
    deadline = time.monotonic() + seconds
    while (until is None or not until.is_set()) and (left := deadline - time.monotonic()) > 0:
        if _client_left(connection):
            return False
        time.sleep(min(0.05, left))
    return True


def _client_left(connection: socket.socket) -> bool:
    """True when the client closed its side of the connection (nothing more to read, ever)."""
    try:
        poller = select.poll()  # not select.select: it refuses descriptors above 1,023 (a long suite opens many)
        poller.register(connection, select.POLLIN | select.POLLHUP)
        if not poller.poll(0):
            return False
        return connection.recv(1, socket.MSG_PEEK) == b""
    except OSError:
        return True


@contextmanager
def serve_as_studio_model(
    settings, responder: Callable[[dict], Reply], *, max_retries: int = 1, timeout: float = 5
) -> Iterator[ScriptedLLMServer]:
    """Start a server answering with `responder` and make it the studio's model (`settings`,
    pytest-django's fixture, restores them after the test); stop it when the block ends."""
    server = ScriptedLLMServer(responder).start()
    settings.AXIOM_LLM_BASE_URL = server.base_url
    settings.AXIOM_LLM_MODEL = "test-model"
    settings.AXIOM_LLM_MAX_RETRIES = max_retries
    settings.AXIOM_LLM_TIMEOUT = timeout
    try:
        yield server
    finally:
        server.stop()


def scripted_pipeline_responder(
    *,
    facts: list[dict] | None = None,
    actions: list[dict] | Callable[[dict], list[dict]] | None = None,
    summary: str = "Kaël is a smuggler who owes the harbour master. He is wary of the Guild.",
) -> Callable[[dict], Reply]:
    """A responder that answers each operation with fixed, valid JSON (or text for reflect)."""
    facts = (
        facts
        if facts is not None
        else [
            {
                "statement": "Kaël paid his debt to the harbour master.",
                "fact_type": "event",
                "who": "Kaël",
                "what": "paid his debt",
                "where": "Port Vey",
                "entities": ["Kaël", "Port Vey"],
            },
            {
                "statement": "Kaël distrusts the Guild.",
                "fact_type": "trait",
                "who": "Kaël",
                "entities": ["Kaël"],
            },
        ]
    )
    default_actions = [
        {"action": "CREATE", "subject": "Kaël", "statement": "Kaël settles his debts.", "source_fact_ids": [1]},
        {"action": "CREATE", "subject": "Kaël", "statement": "Kaël distrusts the Guild.", "source_fact_ids": [2]},
    ]

    def respond(request: dict) -> Reply:
        operation = operation_of(request)
        if operation == "extract":
            return json_reply({"facts": facts})
        if operation == "consolidate":
            chosen = actions(request) if callable(actions) else (actions if actions is not None else default_actions)
            return json_reply({"actions": chosen})
        if operation == "reflect":
            return Reply(content=summary)
        return Reply(status=400)

    return respond


def main() -> None:
    """Serve `scripted_pipeline_responder` in its own process (for benchmarks); print the URL."""
    import sys

    server = ScriptedLLMServer(scripted_pipeline_responder()).start()
    print(server.base_url, flush=True)
    try:
        sys.stdin.read()  # until the parent closes our stdin
    finally:
        server.stop()


if __name__ == "__main__":
    main()

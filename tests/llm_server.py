"""A small OpenAI-compatible chat-completions server for tests and benchmarks.

It listens on 127.0.0.1 (a free port), records every request, and answers from a script:
a responder function `(request_json) -> Reply` decides each answer, so a test can reply by
operation (recognised from the system prompt), fail with a status, stall, or hold a request
until the test releases it. Nothing here is a model: the replies are whatever the test
scripted, and tests assert on the prompts the studio sent.

    with ScriptedLLMServer(responder) as server:
        settings.AXIOM_LLM_BASE_URL = server.base_url
"""
from __future__ import annotations

import json
import threading
import time
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


def operation_of(request: dict) -> str:
    """Return "extract", "consolidate", "reflect" (from the system prompt) or ""."""
    messages = request.get("messages") or []
    system = next((m.get("content", "") for m in messages if m.get("role") == "system"), "")
    if "You extract facts" in system:
        return "extract"
    if "You maintain the beliefs" in system:
        return "consolidate"
    if "You write the mental model" in system:
        return "reflect"
    return ""


def user_prompt(request: dict) -> str:
    messages = request.get("messages") or []
    return next((m.get("content", "") for m in messages if m.get("role") == "user"), "")


def json_reply(payload) -> Reply:
    return Reply(content=json.dumps(payload))


class ScriptedLLMServer:
    def __init__(self, responder: Callable[[dict], Reply] | None = None, *, reject_json_mode: bool = False):
        self.responder = responder or (lambda request: Reply(content="{}"))
        self.reject_json_mode = reject_json_mode
        self.requests: list[dict] = []
        self.lock = threading.Lock()
        self.arrived = threading.Condition(self.lock)
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

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
                if server.reject_json_mode and "response_format" in request:
                    return self._send(400, json.dumps({"error": {"message": "response_format is not supported"}}))
                reply = server.responder(request)
                if reply.hold is not None:
                    reply.hold.wait(timeout=120)
                if reply.delay:
                    time.sleep(reply.delay)
                if reply.raw_body is not None:
                    return self._send(reply.status, reply.raw_body, reply.headers)
                if reply.status != 200:
                    return self._send(reply.status, json.dumps({"error": {"message": "scripted failure"}}), reply.headers)
                body = {
                    "id": "chatcmpl-test",
                    "object": "chat.completion",
                    "model": request.get("model", "test-model"),
                    "choices": [{"index": 0, "message": {"role": "assistant", "content": reply.content}, "finish_reason": "stop"}],
                }
                if reply.usage is not None:
                    body["usage"] = reply.usage
                return self._send(200, json.dumps(body), reply.headers)

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
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host}:{port}/v1"

    def start(self) -> "ScriptedLLMServer":
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


def scripted_pipeline_responder(
    *,
    facts: list[dict] | None = None,
    actions: list[dict] | Callable[[dict], list[dict]] | None = None,
    summary: str = "Kaël is a smuggler who owes the harbour master. He is wary of the Guild.",
) -> Callable[[dict], Reply]:
    """A responder that answers each operation with fixed, valid JSON (or text for reflect)."""
    facts = facts if facts is not None else [
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

"""A recording pass-through for an OpenAI-compatible endpoint, for benchmarks and demo runs.

`RecordingProxy(upstream)` listens on 127.0.0.1 (a free port) and forwards every request to
`upstream` unchanged (method, path below the base URL, headers but Host, body), streaming
answers included, and keeps one `Exchange` per request: when it started and ended, the
request JSON, the status, the answer body (for a streamed answer, the concatenated text of
its deltas and the final finish_reason) and the latency. The studio is pointed at
`proxy.base_url` instead of the endpoint, so what it sent and what the model answered is
known exactly whatever the client does (retries, structured-output fallbacks, streaming):
the benchmark measures the model's answers, not the client's reading of them.

Only for loopback measurement: it binds 127.0.0.1, holds everything in memory, and is not
part of the studio.
"""

from __future__ import annotations

import json
import os
import threading
import time
from dataclasses import asdict, dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

import httpx

HOP_BY_HOP = {"host", "content-length", "transfer-encoding", "connection", "keep-alive", "accept-encoding"}


@dataclass
class Exchange:
    started: float
    ended: float = 0.0
    path: str = ""
    request: dict = field(default_factory=dict)
    status: int = 0
    body: str = ""
    content: str = ""
    finish_reason: str = ""
    streamed: bool = False
    error: str = ""

    @property
    def latency_s(self) -> float:
        return max(0.0, self.ended - self.started)

    def as_dict(self) -> dict:
        data = asdict(self)
        data["latency_s"] = round(self.latency_s, 3)
        return data


def _content_of(body: str) -> tuple[str, str]:
    """Return (message content, finish_reason) of a non-streamed chat completion body."""
    try:
        data = json.loads(body)
        choice = (data.get("choices") or [{}])[0]
        message = choice.get("message") or {}
        return str(message.get("content") or choice.get("text") or ""), str(choice.get("finish_reason") or "")
    except (ValueError, AttributeError, IndexError, TypeError):
        return "", ""


def _content_of_stream(lines: list[str]) -> tuple[str, str]:
    parts, finish = [], ""
    for line in lines:
        if not line.startswith("data:"):
            continue
        payload = line[5:].strip()
        if payload == "[DONE]":
            break
        try:
            data = json.loads(payload)
        except ValueError:
            continue
        for choice in data.get("choices") or []:
            delta = choice.get("delta") or {}
            parts.append(str(delta.get("content") or ""))
            finish = str(choice.get("finish_reason") or finish or "")
    return "".join(parts), finish


class RecordingProxy:
    """Forward requests to `upstream` (a base URL such as http://127.0.0.1:8081/v1) and record them."""

    def __init__(self, upstream: str, *, timeout: float | None = None):
        self.upstream = upstream.rstrip("/")
        if timeout is None:
            # Never shorter than the studio's own wait: a one-request-at-a-time server makes a
            # request queue behind the others, and the proxy must not cut it first.
            timeout = max(900.0, float(os.environ.get("AXIOM_LLM_TIMEOUT") or 0) + 60.0)
        self.exchanges: list[Exchange] = []
        self._lock = threading.Lock()
        self._client = httpx.Client(timeout=timeout)
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):  # quiet
                pass

            def do_GET(self):
                proxy._forward(self, "GET")

            def do_POST(self):
                proxy._forward(self, "POST")

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        base_path = urlsplit(self.upstream).path
        return f"http://127.0.0.1:{self._server.server_address[1]}{base_path}"

    def __enter__(self) -> "RecordingProxy":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._client.close()

    def _forward(self, handler: BaseHTTPRequestHandler, method: str) -> None:
        length = int(handler.headers.get("Content-Length") or 0)
        raw = handler.rfile.read(length) if length else b""
        split = urlsplit(self.upstream)
        base_path = split.path.rstrip("/")
        path = handler.path[len(base_path) :] if handler.path.startswith(base_path) else handler.path
        exchange = Exchange(started=time.time(), path=path)
        try:
            exchange.request = json.loads(raw) if raw else {}
        except ValueError:
            exchange.request = {"_raw": raw.decode("utf-8", "replace")}
        headers = {k: v for k, v in handler.headers.items() if k.lower() not in HOP_BY_HOP}
        url = f"{split.scheme}://{split.netloc}{base_path}{path}"
        try:
            with self._client.stream(method, url, content=raw, headers=headers) as response:
                exchange.status = response.status_code
                streamed = "text/event-stream" in response.headers.get("content-type", "")
                exchange.streamed = streamed
                handler.send_response(response.status_code)
                for key, value in response.headers.items():
                    if key.lower() not in HOP_BY_HOP:
                        handler.send_header(key, value)
                handler.send_header("Transfer-Encoding", "chunked")
                handler.end_headers()
                received = []
                for chunk in response.iter_bytes():
                    received.append(chunk)
                    handler.wfile.write(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
                    handler.wfile.flush()
                handler.wfile.write(b"0\r\n\r\n")
                handler.wfile.flush()
                exchange.body = b"".join(received).decode("utf-8", "replace")
        except (httpx.HTTPError, OSError) as exc:
            exchange.error = f"{type(exc).__name__}: {exc}"
            try:
                handler.send_response(502)
                handler.send_header("Content-Length", "0")
                handler.end_headers()
            except OSError:
                pass
        exchange.ended = time.time()
        if exchange.streamed:
            exchange.content, exchange.finish_reason = _content_of_stream(exchange.body.splitlines())
        else:
            exchange.content, exchange.finish_reason = _content_of(exchange.body)
        with self._lock:
            self.exchanges.append(exchange)

    def answered(self) -> list[Exchange]:
        """Return the exchanges the endpoint answered with 200, in the order they ended."""
        with self._lock:
            return sorted((e for e in self.exchanges if e.status == 200), key=lambda e: e.ended)

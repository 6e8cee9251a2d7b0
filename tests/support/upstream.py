"""The memory proxy tests' scripted upstream (served by tests/llm_server.py as the studio's model).

The living pipeline's operations get the pipeline's fixed answers, and any other request (the
proxy's relays) a narration that names the player's last message and a running number, so two
answers to the same message (a swipe) differ. tests/proxy/conftest.py's `upstream` fixture
serves one.
"""

from __future__ import annotations

import itertools

from tests.llm_server import Reply, operation_of, scripted_pipeline_responder


def last_user(request: dict) -> str:
    for message in reversed(request.get("messages") or []):
        if message.get("role") == "user":
            content = message.get("content")
            return content if isinstance(content, str) else str(content)
    return ""


class Upstream:
    """Answers the proxy's relays; the living pipeline's requests get the pipeline's answers."""

    def __init__(self):
        self.pipeline = scripted_pipeline_responder()
        self.counter = itertools.count(1)
        self.relayed: list[dict] = []
        self.reply: Reply | None = None  # a fixed reply for the next relays, when set

    def answer_for(self, text: str, n: int) -> str:
        return f"Answer {n}: the tide turns as you say '{text[:40]}'."

    def __call__(self, request):
        if operation_of(request):
            return self.pipeline(request)
        self.relayed.append(request)
        if self.reply is not None:
            return self.reply
        return Reply(content=self.answer_for(last_user(request), next(self.counter)))

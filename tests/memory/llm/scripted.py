"""Scripted LLM backends for the prompt and parsing tests (no HTTP).

`ScriptedBackend` answers from a list: each answer is a string, or an `LLMResponse` (to
script `finish_reason: length`). It offers `chat` (what the studio's own backends offer:
the schema is recorded) as well as the seed protocol's `complete`.
`CompleteOnlyBackend` offers `complete` alone, like a third-party `LLMBackend`.
Nothing here is a model; tests assert on the prompts sent and on the parsing.
"""

from __future__ import annotations

from studio.memory.llm.base import LLMResponse


class ScriptedBackend:
    def __init__(self, *answers, error: Exception | None = None):
        self.answers = list(answers)
        self.error = error
        self.calls: list[dict] = []

    def _next(self) -> LLMResponse:
        answer = self.answers.pop(0) if self.answers else ""
        if isinstance(answer, LLMResponse):
            return answer
        return LLMResponse(text=str(answer), model="scripted", finish_reason="stop")

    def chat(self, *, system: str, prompt: str, operation: str = "", json_mode: bool = False, **options) -> LLMResponse:
        self.calls.append(
            {"system": system, "prompt": prompt, "operation": operation, "json_mode": json_mode, **options}
        )
        if self.error is not None:
            raise self.error
        return self._next()

    def complete(self, *, system: str, prompt: str, operation: str = "", json_mode: bool = False) -> str:
        return self.chat(system=system, prompt=prompt, operation=operation, json_mode=json_mode).text

    @property
    def prompt(self) -> str:
        return self.calls[-1]["prompt"]


class CompleteOnlyBackend:
    """Only the seed's `complete`: no schema, no truncation report."""

    def __init__(self, *answers: str):
        self.answers = list(answers)
        self.calls: list[dict] = []

    def complete(self, *, system: str, prompt: str, operation: str = "", json_mode: bool = False) -> str:
        self.calls.append({"system": system, "prompt": prompt, "operation": operation, "json_mode": json_mode})
        return self.answers.pop(0) if self.answers else ""


def truncated(text: str, max_tokens: int = 64) -> LLMResponse:
    """A scripted answer that stopped at the token limit."""
    return LLMResponse(text=text, model="scripted", finish_reason="length", max_tokens=max_tokens)

"""A scripted LLMBackend for the prompt and parsing tests (no HTTP)."""
from __future__ import annotations


class ScriptedBackend:
    def __init__(self, *answers, error: Exception | None = None):
        self.answers = list(answers)
        self.error = error
        self.calls: list[dict] = []

    def complete(self, *, system: str, prompt: str, operation: str = "", json_mode: bool = False) -> str:
        self.calls.append({"system": system, "prompt": prompt, "operation": operation, "json_mode": json_mode})
        if self.error is not None:
            raise self.error
        return self.answers.pop(0) if self.answers else ""

    @property
    def prompt(self) -> str:
        return self.calls[-1]["prompt"]

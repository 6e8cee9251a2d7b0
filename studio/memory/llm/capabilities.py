"""What each (endpoint, model) accepts, remembered process-wide.

Structured outputs are asked for in the best mode a server takes, in this order:

1. `json_schema`        - `response_format: {type: json_schema, json_schema: {name, schema, strict}}`
                          (OpenAI, vLLM, Ollama, llama.cpp's `llama-server`);
2. `json_object_schema` - `response_format: {type: json_object, schema: ...}`
                          (llama-cpp-python's server: grammar-constrained to the schema);
3. `json_object`        - `response_format: {type: json_object}` (any JSON);
4. `text`               - no `response_format`; the schema is written into the prompt.

An operation's `modes` setting (AXIOM_LLM_STRUCTURED_MODES, or _<OP>) keeps only some of
these, in this order: a server where a mode is accepted but slow (llama-cpp-python compiles
the schema into a grammar: under load one extraction took over 900 s with it against 121 s
with plain `json_object`) is told to skip it without the other servers losing it.
A mode that was refused is skipped, a mode that worked is "confirmed" (so a 5xx on it is an
outage, not a refusal), and a sampling field (`repeat_penalty`, `stream_options`, ...) a
server refused is no longer sent. Each of these facts expires after `ttl` seconds (a server
may be upgraded or swapped behind the same URL) and a later refusal overrides a confirmation.
All methods are thread-safe.
"""

from __future__ import annotations

import threading
import time

MODES = ("json_schema", "json_object_schema", "json_object", "text")
SCHEMA_MODES = MODES
JSON_MODES = ("json_object", "text")  # JSON wanted, no schema given
TEXT_MODES = ("text",)

# One hour: long enough that a refusal costs one extra request per hour per process, short
# enough that an upgraded server is noticed the same day.
DEFAULT_TTL = 3600.0


def mode_chain(*, schema: dict | None, json_mode: bool, allowed: tuple[str, ...] | None = None) -> tuple[str, ...]:
    """Return the modes to try, best first, for a request with this schema / JSON wish.

    `allowed` (an operation's `modes` setting) keeps only those modes, in this order; a
    chain it would empty is left whole (a setting never makes a request impossible).
    """
    if schema:
        chain = SCHEMA_MODES
    elif json_mode:
        chain = JSON_MODES
    else:
        chain = TEXT_MODES
    if allowed:
        kept = tuple(mode for mode in chain if mode in allowed)
        return kept or chain
    return chain


class EndpointCapabilities:
    """Refused and confirmed modes and refused fields per (base URL, model), with expiry."""

    def __init__(self, ttl: float = DEFAULT_TTL, clock=time.monotonic):
        self.ttl = ttl
        self._clock = clock
        self._lock = threading.Lock()
        self._refused_modes: dict[tuple[str, str], dict[str, float]] = {}
        self._confirmed_modes: dict[tuple[str, str], dict[str, float]] = {}
        self._refused_fields: dict[tuple[str, str], dict[str, float]] = {}

    def _live(self, table: dict, key) -> set[str]:
        now = self._clock()
        entries = table.get(key) or {}
        expired = [name for name, until in entries.items() if until <= now]
        for name in expired:
            del entries[name]
        return set(entries)

    def _mark(self, table: dict, key, names) -> None:
        until = self._clock() + self.ttl
        entries = table.setdefault(key, {})
        for name in names:
            entries[name] = until

    def modes_to_try(self, key, chain: tuple[str, ...]) -> list[str]:
        """Return `chain` without the refused modes (never empty: plain text stays)."""
        with self._lock:
            refused = self._live(self._refused_modes, key)
        modes = [m for m in chain if m not in refused]
        return modes or [chain[-1]]

    def refuse_mode(self, key, mode: str) -> None:
        if mode == "text":
            return  # plain prompting is the floor; it cannot be refused
        with self._lock:
            self._mark(self._refused_modes, key, [mode])
            self._confirmed_modes.get(key, {}).pop(mode, None)

    def confirm_mode(self, key, mode: str) -> None:
        with self._lock:
            self._mark(self._confirmed_modes, key, [mode])
            self._refused_modes.get(key, {}).pop(mode, None)

    def is_confirmed(self, key, mode: str) -> bool:
        with self._lock:
            return mode in self._live(self._confirmed_modes, key)

    def refused_fields(self, key) -> set[str]:
        with self._lock:
            return self._live(self._refused_fields, key)

    def refuse_fields(self, key, names) -> None:
        with self._lock:
            self._mark(self._refused_fields, key, list(names))

    def snapshot(self, key) -> dict:
        """Return what is known about `key` (for logs, the admin and tests)."""
        with self._lock:
            return {
                "refused_modes": sorted(self._live(self._refused_modes, key)),
                "confirmed_modes": sorted(self._live(self._confirmed_modes, key)),
                "refused_fields": sorted(self._live(self._refused_fields, key)),
            }

    def forget(self, base_url: str) -> None:
        """Drop everything known about the endpoint at `base_url` (all its models)."""
        base_url = base_url.rstrip("/")
        with self._lock:
            for table in (self._refused_modes, self._confirmed_modes, self._refused_fields):
                for key in [k for k in table if k[0] == base_url]:
                    del table[key]

    def clear(self) -> None:
        with self._lock:
            self._refused_modes.clear()
            self._confirmed_modes.clear()
            self._refused_fields.clear()


# The process-wide memory every backend shares (one server answers the same to all of them).
CAPABILITIES = EndpointCapabilities()


def response_format_for(mode: str, *, schema: dict | None, name: str) -> dict | None:
    """Return the `response_format` body entry of `mode` (None for plain text)."""
    if mode == "json_schema":
        return {"type": "json_schema", "json_schema": {"name": name or "answer", "schema": schema, "strict": True}}
    if mode == "json_object_schema":
        return {"type": "json_object", "schema": schema}
    if mode == "json_object":
        return {"type": "json_object"}
    return None

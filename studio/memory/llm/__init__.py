"""The LLM client that extraction, consolidation, reflection and the narrator talk to.

- `base`: the `LLMBackend` protocol (`complete(...) -> str`, the seed's), `LLMResponse`
  (text, usage, `finish_reason`, `truncated`, the structured-output mode used), the
  errors, `OperationOptions` and `ask` (what the living modules call).
- `client`: `OpenAICompatibleBackend`, for the `/chat/completions` dialect that Ollama,
  llama.cpp (`llama-server` and llama-cpp-python), vLLM, LM Studio and hosted APIs share:
  non-streamed `chat` and streamed `stream` (server-sent events), retries with backoff,
  structured outputs with a JSON schema (falling back through the modes a server takes),
  sampling fields sent only where accepted, a model and settings per operation.
- `abort`: `StreamAbort`, ending a streamed request from another thread even before its
  first byte, and `abort_when` / `AbortWatch`, the watcher thread that flips it (the console's
  Stop; a client that left the API's or the proxy's stream).
- `capabilities`: what each endpoint and model accepts, remembered process-wide.
- `tracked`: `TrackedLLM`, one job's view of a backend: spend guard, call log, truncation.
- `relay`: a caller's own chat-completions body relayed byte for byte (the memory proxy's
  upstream call, `TrackedLLM.relay`), with the answer read out as it passes.
- `operation`: `run_operation`, how extract, consolidate and reflect ask, parse, name a
  truncation and never raise (one runner for the three).
- `parsing` / `normalise`: reading JSON and fields out of what real models answer.

`get_llm_backend()` builds the backend from settings, or returns None when no endpoint is
configured (living-mode jobs then end as "skipped: no LLM configured").
"""

from __future__ import annotations

import os
import threading

from django.conf import settings

from studio.memory.llm.abort import AbortWatch, StreamAbort, abort_when
from studio.memory.llm.base import (
    OPERATIONS,
    LLMBackend,
    LLMCancelled,
    LLMError,
    LLMRequestRejected,
    LLMResponse,
    LLMTruncated,
    LLMUnavailable,
    OperationOptions,
    SpendLimitExceeded,
    ask,
    estimate_tokens,
)
from studio.memory.llm.capabilities import CAPABILITIES, MODES, EndpointCapabilities
from studio.memory.llm.client import ChatStream, OpenAICompatibleBackend
from studio.memory.llm.parsing import (
    parse_items,
    parse_json_payload,
    salvage_json_objects,
    scan_items,
    scan_json,
    strip_code_fences,
)
from studio.memory.llm.relay import Relay, RelayRefused
from studio.memory.llm.tracked import SpendStatus, TrackedLLM, spend_status, user_spend_status

__all__ = [
    "OPERATIONS",
    "MODES",
    "CAPABILITIES",
    "ChatStream",
    "EndpointCapabilities",
    "LLMBackend",
    "LLMCancelled",
    "LLMError",
    "LLMRequestRejected",
    "LLMResponse",
    "LLMTruncated",
    "LLMUnavailable",
    "OpenAICompatibleBackend",
    "OperationOptions",
    "Relay",
    "RelayRefused",
    "SpendLimitExceeded",
    "SpendStatus",
    "AbortWatch",
    "StreamAbort",
    "TrackedLLM",
    "abort_when",
    "ask",
    "estimate_tokens",
    "get_llm_backend",
    "parse_items",
    "parse_json_payload",
    "salvage_json_objects",
    "scan_items",
    "scan_json",
    "spend_status",
    "user_spend_status",
    "strip_code_fences",
]

_BACKENDS: dict[tuple, OpenAICompatibleBackend] = {}
_BACKENDS_LOCK = threading.Lock()


def operation_options_from_settings() -> dict[str, OperationOptions]:
    """Return the per-operation request settings (AXIOM_LLM_<SETTING>_<OPERATION>)."""
    configured = getattr(settings, "AXIOM_LLM_OPERATION_OPTIONS", None) or {}
    return {op: OperationOptions.from_value(configured.get(op)) for op in OPERATIONS}


def get_llm_backend() -> OpenAICompatibleBackend | None:
    """Return the backend configured in settings, or None when no endpoint is set.

    One backend (and its pooled HTTP client) per process and configuration: building an
    httpx client loads the TLS trust store, which costs tens of milliseconds per job.
    """
    base_url = settings.AXIOM_LLM_BASE_URL
    if not base_url:
        return None
    options = {
        "base_url": base_url,
        "model": settings.AXIOM_LLM_MODEL or "default",
        "api_key": settings.AXIOM_LLM_API_KEY,
        "timeout": settings.AXIOM_LLM_TIMEOUT,
        "max_retries": settings.AXIOM_LLM_MAX_RETRIES,
        "max_tokens": settings.AXIOM_LLM_MAX_TOKENS,
        "operation_models": {
            "extract": settings.AXIOM_LLM_MODEL_EXTRACT,
            "consolidate": settings.AXIOM_LLM_MODEL_CONSOLIDATE,
            "reflect": settings.AXIOM_LLM_MODEL_REFLECT,
            "narrate": getattr(settings, "AXIOM_LLM_MODEL_NARRATE", ""),
            "summarize": getattr(settings, "AXIOM_LLM_MODEL_SUMMARIZE", ""),
            "guard": getattr(settings, "AXIOM_LLM_MODEL_GUARD", ""),
        },
        "operation_options": operation_options_from_settings(),
        "stream_all": getattr(settings, "AXIOM_LLM_STREAM", False),
    }
    key = (os.getpid(), repr(sorted(options.items())))
    with _BACKENDS_LOCK:
        backend = _BACKENDS.get(key)
        if backend is None:
            backend = _BACKENDS[key] = OpenAICompatibleBackend(**options)
        return backend

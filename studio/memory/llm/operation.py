"""One runner for the living modules' LLM operations: extract, consolidate, reflect.

Each operation asks one question and reads one answer the same way, so the way lives here
once (`run_operation`):

1. build the request (`Request`: the prompt, the JSON schema, a parser of the answer);
2. `ask` the backend under the operation's name (the `LLMCall` log, per-operation options);
3. parse; a parser raises ValueError for an answer with nothing usable, `LLMTruncated` for
   one cut before its first complete item (`read_items` is the list answers' first step);
4. an answer the token limit cut (or a parser's `LLMTruncated`) becomes one `LLMTruncated`
   naming the setting to raise, `AXIOM_LLM_MAX_TOKENS_<OPERATION>`;
5. never raise: any failure, building the request included, gives the operation's empty
   result and the exception, so a job can record why nothing came out while the engine's
   functions (`extract_facts`, `consolidate`, `reflect`) keep their never-raising contract.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from studio.memory.llm.base import LLMResponse, LLMTruncated, ask
from studio.memory.llm.parsing import ItemScan, scan_items

logger = logging.getLogger(__name__)

T = TypeVar("T")


@dataclass(frozen=True)
class Operation:
    """What stays the same from one call of an operation to the next."""

    name: str  # the LLMCall operation and the AXIOM_LLM_MAX_TOKENS_<NAME> setting
    system: str  # the system prompt
    item: str  # one complete piece of an answer ("fact"), for the truncation message
    activity: str  # what the log says produced nothing ("fact extraction")


@dataclass(frozen=True)
class Request(Generic[T]):
    """One call's question and how to read its answer."""

    prompt: str
    schema: dict[str, Any]
    parse: Callable[[LLMResponse], T]


def truncation_error(operation: Operation, response: LLMResponse) -> LLMTruncated:
    """Return the error of an answer cut before its first complete item, naming the limit to raise."""
    return LLMTruncated(
        f"{operation.name}: the answer hit the token limit ({response.max_tokens or '?'} tokens) before one "
        f"complete {operation.item}; raise AXIOM_LLM_MAX_TOKENS_{operation.name.upper()} (or AXIOM_LLM_MAX_TOKENS)"
    )


def run_operation(
    llm, operation: Operation, request: Callable[[], Request[T]], *, empty: T, about: str = ""
) -> tuple[T, Exception | None]:
    """Return (result, failure): the parsed answer and None, or `empty` and the exception that emptied it.

    `request` is called inside the guard, so a failure while building the prompt is a failure
    of the operation like any other; `about` names the subject in the log line.
    """
    try:
        asked = request()
        response = ask(llm, system=operation.system, prompt=asked.prompt, operation=operation.name, schema=asked.schema)
        try:
            return asked.parse(response), None
        except (ValueError, LLMTruncated) as exc:
            if response.truncated or isinstance(exc, LLMTruncated):
                raise truncation_error(operation, response) from exc
            raise
    except Exception as exc:  # noqa: BLE001 - the engine contract: never raise
        logger.info("%s produced nothing%s: %s", operation.activity, f" for {about!r}" if about else "", exc)
        return empty, exc


def read_items(text: str, key: str, *, is_item: Callable[[dict], bool], noun: str) -> ItemScan:
    """Return the complete items of a list answer ({key: [...]}, a bare list or one item).

    Raise ValueError when the answer holds no JSON, or objects none of which is an item
    (`is_item`); `noun` names an item in the message.
    """
    scan = scan_items(text, key, is_item=is_item)
    if not scan.found_json:
        raise ValueError(f"no JSON in the answer: {str(text)[:120]!r}")
    if scan.items and not any(isinstance(item, dict) and is_item(item) for item in scan.items):
        raise ValueError(f"no {noun} in the answer: {str(text)[:120]!r}")
    return scan

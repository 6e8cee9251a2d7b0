"""Field types the API's requests and responses share: strict JSON values, text without NUL, the
enumerations (memory modes, job kinds and statuses, trends)."""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal, Optional

from pydantic import AfterValidator, Field, Strict
from pydantic_core import PydanticCustomError

from studio.memory.recall.query_params import LIMITS


def _no_nul(value: str) -> str:
    if "\x00" in value:
        raise PydanticCustomError("nul_character", "Must not contain NUL characters.")
    return value


def _not_blank(value: str) -> str:
    if not value.strip():
        raise PydanticCustomError("blank", "Must not be blank.")
    return value


def _object_without_nul(value: dict) -> dict:
    if "\\u0000" in json.dumps(value):
        raise PydanticCustomError("nul_character", "Must not contain NUL characters.")
    return value


# -- field types ---------------------------------------------------------------------------

Text = Annotated[str, Strict(), AfterValidator(_no_nul)]
"""A string as sent in a JSON body (no coercion), without NUL."""
Name = Annotated[str, Strict(), AfterValidator(_no_nul), AfterValidator(_not_blank)]
Int = Annotated[int, Strict()]
"""An integer as sent in a JSON body: `true` and `1.0` are not integers."""
Bool = Annotated[bool, Strict()]
JsonObject = Annotated[dict[str, Any], Strict(), AfterValidator(_object_without_nul)]
QueryText = Annotated[str, AfterValidator(_no_nul)]
QueryInt = Optional[int]
TermList = Annotated[
    list[Annotated[Text, Field(max_length=LIMITS.focus_term_chars)]], Field(max_length=LIMITS.focus_terms)
]
QueryTermList = Optional[list[QueryText]]

MemoryModeName = Literal["classic", "living"]
JobStatusName = Literal["queued", "running", "done", "failed", "skipped", "paused"]
JobKindName = Literal[
    "sync_lore", "embed_turn", "living_turn", "refresh_models", "vector_rollback", "fork_vectors", "summarize_chapter"
]
TrendName = Literal["new", "strengthening", "weakening", "stale", "stable"]

"""The API's query strings and request bodies (validated by django-ninja before a view runs)."""

from __future__ import annotations

from typing import Any, Literal, Optional

from ninja import Schema
from pydantic import Field, model_validator

from studio.api.limited import limited
from studio.api.schemas.fields import (
    Bool,
    Int,
    JobKindName,
    JobStatusName,
    JsonObject,
    MemoryModeName,
    Name,
    QueryInt,
    QueryTermList,
    QueryText,
    TermList,
    Text,
    TrendName,
)
from studio.memory.recall.query_params import DEFAULT_K, DEFAULT_K_LORE, DEFAULT_K_NARRATIVE, LIMITS


# -- query strings -------------------------------------------------------------------------


class QuerySchema(Schema):
    """Parameters from a query string: `?k=` means the parameter was not given (its default applies)."""

    @model_validator(mode="before")
    @classmethod
    def _drop_blank(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        kept = {}
        for name, value in data.items():
            if isinstance(value, list):
                value = [v for v in value if v != ""]
            if value not in ("", []):
                kept[name] = value
        return kept


class PageQuery(QuerySchema):
    limit: QueryInt = Field(50, ge=1, le=200, description="Page size.")
    offset: QueryInt = Field(0, ge=0, le=1_000_000, description="Rows to skip.")


class SaveListQuery(PageQuery):
    universe: Optional[QueryText] = Field(None, max_length=80, description="Only saves of this universe (slug).")


class TurnListQuery(PageQuery):
    after_turn: QueryInt = Field(None, ge=0, description="Only turns after this one.")
    include_state: bool = Field(False, description="Add each turn's game state.")


class HorizonQuery(PageQuery):
    max_turn_id: QueryInt = Field(None, ge=0, description="Only rows from turns <= this (the history window).")


class FactQuery(HorizonQuery):
    entity: Optional[QueryText] = Field(None, max_length=200, description="Only facts naming this entity.")


class BeliefQuery(HorizonQuery):
    subject: Optional[QueryText] = Field(None, max_length=200, description="Only beliefs about this subject.")
    trend: Optional[TrendName] = None
    stale: Optional[bool] = None


class MentalModelQuery(HorizonQuery):
    subject: Optional[QueryText] = Field(None, max_length=200)


class JobQuery(PageQuery):
    status: Optional[JobStatusName] = None
    kind: Optional[JobKindName] = None
    turn_id: QueryInt = Field(None, ge=0)


class RewindPreviewQuery(QuerySchema):
    turn_id: QueryInt = Field(..., ge=0, description="Preview a rewind to the end of this turn.")


class ExportQuery(QuerySchema):
    compress: Optional[Literal["gzip"]] = Field(None, description="Gzip the file (.json.gz).")


class ImportQuery(QuerySchema):
    name: limited("save.name", empty_ok=True) = Field("", description="A name for the new save (default: the file's).")


# -- request bodies ------------------------------------------------------------------------


class SaveCreate(Schema):
    universe: Name = Field(..., max_length=80, description="Slug of a universe you belong to.")
    name: limited("save.name")
    memory_mode: MemoryModeName = "classic"
    beliefs_enabled: Bool = True


class TurnAppend(Schema):
    player_input: limited("turn.player_input") = ""
    narrative: limited("turn.narrative")
    state: Optional[JsonObject] = Field(
        None,
        description="The game state after the turn (State_Cache). Who knows what (docs/knowledge.md): "
        "`present` (names on scene; else carried from the previous turn until `location` changes) "
        "and `reveals` ([{to, entry | fact, from}]) are recorded with the turn.",
    )
    turn_id: Optional[Int] = Field(
        None, ge=1, description="Optional: the turn this should become; 409 unless it is current_turn + 1."
    )


class TurnUpdate(Schema):
    narrative: limited("turn.narrative")


class _Recordable(Schema):
    record: Bool = Field(False, description="Store the query for lore-edit replay (a POST; needs the playtester role).")


class QueryRequest(_Recordable):
    query_text: Text = Field(..., max_length=LIMITS.query_text_chars)
    k: Int = Field(DEFAULT_K, ge=LIMITS.k_min, le=LIMITS.k_max)
    current_turn_id: Optional[Int] = Field(
        None, ge=0, description="The horizon; never later than the save's current turn (the default)."
    )
    max_turn_id: Optional[Int] = Field(None, ge=0, description="Only chunks from turns <= this.")
    focus_terms: Optional[TermList] = Field(
        None, description="Here-and-now terms (location, characters on scene) that boost chunks naming them."
    )
    chunk_type: Optional[Text] = Field(
        None, max_length=LIMITS.chunk_type_chars, description="Only chunks of this type, e.g. lore."
    )
    exclude_chunk_type: Optional[Text] = Field(None, max_length=LIMITS.chunk_type_chars)
    expand_links: Bool = Field(False, description="Also return the lore entries each lore hit links to (one hop).")
    pov: Optional[TermList] = Field(
        None, description="Only hits these characters know (docs/knowledge.md); `pov_left_out` says why for the rest."
    )


class QueryQuery(QuerySchema):
    """The same parameters as `QueryRequest`, from a query string (GET); `record` is refused there."""

    query_text: Optional[QueryText] = Field(None, max_length=LIMITS.query_text_chars)
    k: QueryInt = Field(DEFAULT_K, ge=LIMITS.k_min, le=LIMITS.k_max)
    current_turn_id: QueryInt = Field(None, ge=0)
    max_turn_id: QueryInt = Field(None, ge=0)
    focus_terms: QueryTermList = Field(None, max_length=LIMITS.focus_terms)
    chunk_type: Optional[QueryText] = Field(None, max_length=LIMITS.chunk_type_chars)
    exclude_chunk_type: Optional[QueryText] = Field(None, max_length=LIMITS.chunk_type_chars)
    expand_links: bool = False
    pov: QueryTermList = Field(None, max_length=LIMITS.focus_terms)
    record: bool = False


BUDGET_HELP = (
    "Tokens of memory; absent: the narrator's (the universe's context_budget, else 2,000), as the narrator reads it."
)
POV_HELP = (
    "Characters whose point of view the context adds (what each knows; secrets marked narrator-only); "
    "[] (or `none` in a query string) for none; absent: the characters on scene. docs/knowledge.md."
)


def pov_names(names) -> tuple[str, ...] | None:
    """Return the point of view a request's `pov` asks for (`ContextParams.pov`, POV_HELP): None when
    absent (the characters on scene), else the names given; blank names and "none" are left out, so
    [] and ["none"] ask for none."""
    if names is None:
        return None
    return tuple(name for name in names if name.strip() and name.strip().casefold() != "none")


class ContextRequest(_Recordable):
    query_text: Text = Field("", max_length=LIMITS.query_text_chars, description="Usually the player's input.")
    focus_terms: Optional[TermList] = None
    pov: Optional[TermList] = Field(None, description=POV_HELP)
    token_budget: Optional[Int] = Field(
        None, ge=LIMITS.token_budget_min, le=LIMITS.token_budget_max, description=BUDGET_HELP
    )
    k_narrative: Int = Field(DEFAULT_K_NARRATIVE, ge=LIMITS.k_min, le=LIMITS.k_max)
    k_lore: Int = Field(DEFAULT_K_LORE, ge=LIMITS.k_min, le=LIMITS.k_max)


class ContextQuery(QuerySchema):
    query_text: QueryText = Field("", max_length=LIMITS.query_text_chars)
    focus_terms: QueryTermList = Field(None, max_length=LIMITS.focus_terms)
    pov: QueryTermList = Field(None, max_length=LIMITS.focus_terms, description=POV_HELP)
    token_budget: QueryInt = Field(
        None, ge=LIMITS.token_budget_min, le=LIMITS.token_budget_max, description=BUDGET_HELP
    )
    k_narrative: QueryInt = Field(DEFAULT_K_NARRATIVE, ge=LIMITS.k_min, le=LIMITS.k_max)
    k_lore: QueryInt = Field(DEFAULT_K_LORE, ge=LIMITS.k_min, le=LIMITS.k_max)
    record: bool = False


class RewindRequest(Schema):
    turn_id: Int = Field(..., ge=0, description="Rewind to the end of this turn.")
    expected_current_turn: Optional[Int] = Field(
        None, ge=0, description="Optional guard: 409 if the save is no longer at this turn."
    )


class ForkRequest(Schema):
    turn_id: Optional[Int] = Field(None, ge=0, description="Fork as of this turn (default: the current turn).")
    name: Optional[limited("save.name", empty_ok=True)] = None


class NarrateRequest(Schema):
    player_input: Text = Field(..., max_length=4000, description="The player's action.")
    pov: Optional[TermList] = Field(
        None,
        description="Characters whose point of view the memory carries (docs/knowledge.md); [] for none; "
        "absent: those on scene.",
    )
    present: Optional[TermList] = Field(
        None,
        description="Who is on scene for this turn (names or Lore Book keys); used as the point of view when "
        "`pov` is absent. Send it again in the state (`present`) when the turn is appended.",
    )
    stream: Bool = Field(
        False, description="Answer as server-sent events (as does `Accept: text/event-stream`); see docs/api.md."
    )

"""The API's request and response schemas (pydantic, through django-ninja): the OpenAPI document is generated from them.

Requests: a view declares `payload: SomeIn` (the JSON body) or `params: Query[SomeQuery]` (the
query string); django-ninja validates it before the view runs and `studio.api.ninja_api` turns
every problem into one 400 `validation_error` whose details map each field to its messages.
Bodies are strict (JSON types as sent: `"5"` is not an integer, `true` is not a number);
query strings are text, so their integers and booleans are parsed. No string may hold NUL
(PostgreSQL cannot store it); lone surrogates and excessive nesting are refused before this,
where the body is parsed (`studio.api.http.json_body`).

Responses: the views build their JSON with `studio.api.serializers` (plain dicts, no per-request
validation cost); the response schemas below describe them, and tests/api/test_openapi.py
validates real responses against the generated document, so the two cannot drift apart.
"""
from __future__ import annotations

import json
from typing import Annotated, Any, Literal, Optional

from ninja import Schema
from pydantic import AfterValidator, ConfigDict, Field, Strict, model_validator
from pydantic_core import PydanticCustomError

from studio.api.limited import limited
from studio.memory.recall.query_params import DEFAULT_K, DEFAULT_K_LORE, DEFAULT_K_NARRATIVE, LIMITS


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
TermList = Annotated[list[Annotated[Text, Field(max_length=LIMITS.focus_term_chars)]], Field(max_length=LIMITS.focus_terms)]
QueryTermList = Optional[list[QueryText]]

MemoryModeName = Literal["classic", "living"]
JobStatusName = Literal["queued", "running", "done", "failed", "skipped", "paused"]
JobKindName = Literal["sync_lore", "embed_turn", "living_turn", "refresh_models", "vector_rollback", "fork_vectors",
                      "summarize_chapter"]
TrendName = Literal["new", "strengthening", "weakening", "stale", "stable"]


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
        None, description="The game state after the turn (State_Cache). Who knows what (docs/knowledge.md): "
                          "`present` (names on scene; else carried from the previous turn until `location` changes) "
                          "and `reveals` ([{to, entry | fact, from}]) are recorded with the turn.")
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
    chunk_type: Optional[Text] = Field(None, max_length=LIMITS.chunk_type_chars, description="Only chunks of this type, e.g. lore.")
    exclude_chunk_type: Optional[Text] = Field(None, max_length=LIMITS.chunk_type_chars)
    expand_links: Bool = Field(False, description="Also return the lore entries each lore hit links to (one hop).")
    pov: Optional[TermList] = Field(
        None, description="Only hits these characters know (docs/knowledge.md); `pov_left_out` says why for the rest.")


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


BUDGET_HELP = "Tokens of memory; absent: the narrator's (the universe's context_budget, else 2,000), as the narrator reads it."
POV_HELP = ("Characters whose point of view the context adds (what each knows; secrets marked narrator-only); "
            "[] (or `none` in a query string) for none; absent: the characters on scene. docs/knowledge.md.")


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
    token_budget: Optional[Int] = Field(None, ge=LIMITS.token_budget_min, le=LIMITS.token_budget_max, description=BUDGET_HELP)
    k_narrative: Int = Field(DEFAULT_K_NARRATIVE, ge=LIMITS.k_min, le=LIMITS.k_max)
    k_lore: Int = Field(DEFAULT_K_LORE, ge=LIMITS.k_min, le=LIMITS.k_max)


class ContextQuery(QuerySchema):
    query_text: QueryText = Field("", max_length=LIMITS.query_text_chars)
    focus_terms: QueryTermList = Field(None, max_length=LIMITS.focus_terms)
    pov: QueryTermList = Field(None, max_length=LIMITS.focus_terms, description=POV_HELP)
    token_budget: QueryInt = Field(None, ge=LIMITS.token_budget_min, le=LIMITS.token_budget_max, description=BUDGET_HELP)
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
        None, description="Characters whose point of view the memory carries (docs/knowledge.md); [] for none; "
                          "absent: those on scene.")
    present: Optional[TermList] = Field(
        None, description="Who is on scene for this turn (names or Lore Book keys); used as the point of view when "
                          "`pov` is absent. Send it again in the state (`present`) when the turn is appended.")
    stream: Bool = Field(
        False, description="Answer as server-sent events (as does `Accept: text/event-stream`); see docs/api.md."
    )


# -- responses -----------------------------------------------------------------------------

Time = Optional[str]


class ErrorBody(Schema):
    code: str = Field(..., description="Stable machine-readable code, e.g. validation_error.")
    message: str = Field(..., description="What went wrong, for a person.")
    details: dict[str, Any] = Field(..., description="For validation errors: {field: [messages]}; otherwise extra context.")


class Error(Schema):
    error: ErrorBody


class Token(Schema):
    name: str
    prefix: str
    created_at: Time = None
    last_used_at: Time = None


class Roles(Schema):
    staff: bool
    author: bool
    playtester: bool


class Me(Schema):
    username: str
    roles: Roles
    authenticated_by: Literal["token", "session"]
    token: Optional[Token] = None


class Persona(Schema):
    name: str = Field("", description="The player character's name: {{user}}, and who “you” is in memory.")
    description: str = Field("", description="Who the player character is, for the narrator alone.")
    has_portrait: bool = False


class Universe(Schema):
    slug: str
    name: str
    description: str = ""
    persona: Persona = Field(default_factory=Persona, description="The player persona play reads (universe meta "
                             "player_character / player_description; an old one-value name is split).")
    created_at: Time = None
    updated_at: Time = None


class Save(Schema):
    save_id: str
    name: str
    universe: str = Field(..., description="The universe's slug.")
    memory_mode: MemoryModeName
    beliefs_enabled: bool = True
    current_turn: int
    timeline_generation: int = Field(..., description="Incremented by every rewind.")
    forked_from: Optional[str] = None
    fork_turn: Optional[int] = None
    created_at: Time = None
    last_activity_at: Time = None


class Turn(Schema):
    turn_id: int
    player_input: str
    narrative: str
    created_at: Time = None
    state: Optional[dict[str, Any]] = Field(None, description="Only when asked for (include_state) or just appended.")


class TurnAppended(Schema):
    turn: Turn
    save: Save


class Fact(Schema):
    model_config = ConfigDict(extra="allow")
    fact_id: int
    turn_id: int
    statement: str
    fact_type: str = ""
    who: str = ""
    what: str = ""
    when: str = ""
    where: str = ""
    why: str = ""
    entities: list[str] = []


class BeliefSource(Schema):
    fact_id: int
    turn_id: int


class Belief(Schema):
    model_config = ConfigDict(extra="allow")
    observation_id: int
    statement: str
    subject: str = Field(..., description="Who the belief is about; '' for the world.")
    proof_count: int
    sources: list[BeliefSource] = []
    history: list[dict[str, Any]] = []
    created_turn_id: int = 0
    updated_turn_id: int = 0
    stale: bool = False
    trend: TrendName


class MentalModel(Schema):
    model_config = ConfigDict(extra="allow")
    model_id: int
    subject: str
    summary: str
    sources: list[int] = []
    created_turn_id: int = 0
    updated_turn_id: int = 0
    stale: bool = False


class Job(Schema):
    id: int
    kind: JobKindName
    status: JobStatusName
    save_id: Optional[str] = None
    turn_id: Optional[int] = None
    timeline_generation: int = 0
    progress: str = ""
    error: str = ""
    attempts: int = 0
    result: dict[str, Any] = {}
    created_at: Time = None
    started_at: Time = None
    finished_at: Time = None
    duration_seconds: Optional[float] = None


class RetrySkipped(Schema):
    model_config = ConfigDict(extra="allow")


class RewindResult(Schema):
    save_id: str
    from_turn: int
    target_turn: int
    changed: bool = Field(..., description="False when the save already was at the target turn.")
    message: str
    counts: dict[str, Optional[int]]
    timeline_generation: int = 0
    vector_pending: bool = False
    vector_error: str = ""
    save: Save


class BeliefChange(Schema):
    before: Belief
    after: Belief
    restored: bool = False


class MentalModelChange(Schema):
    before: MentalModel
    after: MentalModel


class RewindPreview(Schema):
    save_id: str
    from_turn: int
    target_turn: int
    changed: bool
    message: str
    counts: dict[str, int]
    beliefs_deleted: list[Belief] = []
    beliefs_changed: list[BeliefChange] = []
    mental_models_deleted: list[MentalModel] = []
    mental_models_changed: list[MentalModelChange] = []


class Chunk(Schema):
    model_config = ConfigDict(extra="allow")
    id: str = Field(..., description="The chunk id in the vector store.")
    text: str
    turn_id: Optional[int] = None
    chunk_type: Optional[str] = None
    entry_id: Optional[str] = Field(None, description="The lore entry a lore chunk came from.")
    score: Optional[float] = None
    distance: Optional[float] = None
    metadata: Optional[dict[str, Any]] = None
    explain: Optional[dict[str, Any]] = Field(
        ..., description="Why the chunk ranked where it did: per-arm ranks and scores, focus boost, rerank score."
    )


class QueryResult(Schema):
    save_id: str
    query_text: str
    current_turn_id: int
    results: list[Chunk]
    warnings: list[str] = Field(..., description="Degradations, e.g. a retrieval arm was down.")
    stats: dict[str, Any] = Field(..., description=(
        "What the search did: stage timings (ms), corpus and arm sizes, arm availability, the arms skipped and why, "
        'the time the query names and the turns preferred for it (named_time, docs/retrieval.md "Named time").'))


class ContextItem(Schema):
    model_config = ConfigDict(extra="allow")
    layer: Literal["story", "chapter", "mental_model", "belief", "fact", "narrative", "lore"] = Field(
        ..., description="The memory layer (studio.memory.recall.layout.LAYERS); items come in the order the "
                         "prompt prints them (the layout's sections).")
    text: str
    tokens: int
    reason: str = ""
    why: dict[str, Any] = {}
    ref: dict[str, Any] = {}
    included: bool
    cut: str = Field("", description="Why an item was left out whole (over budget or its layer's share); empty when included.")
    policy: dict[str, Any] = Field({}, description="Its budget policy: section, share class, offer tier and rank, recall, "
                                                   "refill, protected, outside_budget, per_action (docs/architecture.md).")


class LoreExplanation(Schema):
    model_config = ConfigDict(extra="allow")
    entry_id: str
    title: str
    included: bool = Field(..., description="In the assembled context (activated or found by meaning, and within the budget).")
    activated: bool = Field(..., description="Activated by the Lore Book's rules for the next turn.")
    code: str = Field(..., description="The activation decision: constant, key, recursion, sticky, cooldown, ... (docs/lore.md).")
    reasons: list[str] = Field(..., description="The activation decision in sentences.")
    matched_key: str = ""
    matched_in: str = Field("", description="Where the key matched: the pending input, turn N, or an entry's text (recursion).")
    via_entry: str = Field("", description="The entry whose text activated this one (recursion).")
    pass_index: Optional[int] = None
    roll: Optional[float] = Field(None, description="Probability roll (0-100) when one was drawn.")
    threshold: Optional[float] = Field(None, description="The entry's probability.")
    group: str = ""
    rivals: list[str] = Field([], description="Entry ids it won its inclusion group against, or lost to.")
    regex_timeouts: list[str] = Field([], description="Regex keys whose search ran past its time limit (counted as not matching).")
    semantic_rank: Optional[int] = Field(None, description="Rank among the lore found by meaning, when it was found.")
    context: list[str] = Field(..., description="What the context did: semantic rank, budget decision.")


class MemoryContext(Schema):
    model_config = ConfigDict(extra="allow")
    save_id: str
    turn: int
    query_text: str = ""
    focus_terms: list[str] = []
    subjects: list[str] = Field([], description="The subject keys the living memory's layers read (lower-cased).")
    focus: list[dict[str, Any]] = Field(
        [], description="Who is in focus, each once: `name` (a character's Lore Book title), `key`, `why`, the `term` "
                        "that named it, the `entry_id` it resolved to and `by` what (its title, one of its keys, a part "
                        "of its title), and every subject `keys` it answers to (docs/playtesting.md).")
    token_budget: int
    used_tokens: int
    cut_tokens: int = 0
    items: list[ContextItem]
    text: str = Field(..., description="The memory as the narrator's prompt carries it, byte for byte (the one renderer: "
                                       "sections, marks, story-time headings).")
    text_tokens: int = Field(0, description="The tokens of `text` (the budget's counter).")
    parts: list[dict[str, Any]] = Field([], description="`text`'s sections in order: section, tokens, per_action.")
    policy: Optional[dict[str, Any]] = Field(None, description="Every knob the context was built with (studio.memory.recall.policy).")
    timings: dict[str, float] = {}
    notes: list[str] = []
    shares: dict[str, int] = Field({}, description="Budget share per class (percent of token_budget; Universe_Meta context_share_*).")
    reserve_recall: int = Field(0, description="Percent of token_budget kept for what the action recalls until it has been "
                                               "offered (Universe_Meta context_reserve_recall; docs/long-play.md).")
    cap_recall: int | None = Field(None, description="Percent of token_budget that what changes with each action (what it "
                                                     "recalled, lore its turn activated) may use in all, or null: no cap "
                                                     "(Universe_Meta context_cap_recall; docs/long-play.md).")
    macros: dict[str, str] = Field({}, description="Who {{user}} and {{char}} are in the item texts.")
    queries: list[dict[str, Any]] = Field([], description="The two vector queries (narrative, lore) as Lore replay records them.")
    lore_explain: list[LoreExplanation] = Field(..., description="One record per entry of the save's Lore Book, in book order.")
    shown_turns: list[int] = Field([], description="The turns the story so far shows in full (layer `chapter`: the open "
                                                   "chapter's window), oldest first (docs/long-play.md).")
    chapter_start: int = Field(1, description="The open chapter's first turn.")
    pov: Optional[dict[str, Any]] = Field(
        None, description="Who knows what: the characters on scene, their sections, the narrator-only items and "
                          "one explain record per (item, character) (docs/knowledge.md).")


class PromptOut(Schema):
    system: str
    user: str
    chars: int


class Narration(Schema):
    save_id: str
    turn_id: int
    player_input: str
    narrative: str
    appended: Literal[False]
    model: str
    finish_reason: Optional[str] = None
    truncated: bool = False
    latency_ms: Optional[int] = None
    prompt_tokens: Optional[int] = None
    completion_tokens: Optional[int] = None
    prompt: PromptOut
    context: MemoryContext


class SaveImported(Schema):
    save: Save
    counts: dict[str, int]
    warnings: list[str]
    jobs_queued: int


class _Page(Schema):
    limit: int
    offset: int
    next_offset: Optional[int] = Field(..., description="Offset of the next page; null on the last page.")


class UniversePage(_Page):
    items: list[Universe]


class SavePage(_Page):
    items: list[Save]


class TurnPage(_Page):
    items: list[Turn]


class FactPage(_Page):
    items: list[Fact]


class BeliefPage(_Page):
    items: list[Belief]
    now_turn: int


class MentalModelPage(_Page):
    items: list[MentalModel]


class JobPage(_Page):
    items: list[Job]

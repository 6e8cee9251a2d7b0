"""The API's response schemas: what the views' plain dicts (`studio.api.serializers`) hold, for the
OpenAPI document; tests/api/test_openapi.py validates real responses against them."""

from __future__ import annotations

from typing import Any, Literal, Optional

from ninja import Schema
from pydantic import ConfigDict, Field

from studio.api.schemas.fields import JobKindName, JobStatusName, MemoryModeName, TrendName


# -- responses -----------------------------------------------------------------------------

Time = Optional[str]


class ErrorBody(Schema):
    code: str = Field(..., description="Stable machine-readable code, e.g. validation_error.")
    message: str = Field(..., description="What went wrong, for a person.")
    details: dict[str, Any] = Field(
        ..., description="For validation errors: {field: [messages]}; otherwise extra context."
    )


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
    persona: Persona = Field(
        default_factory=Persona,
        description="The player persona play reads (universe meta "
        "player_character / player_description; an old one-value name is split).",
    )
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
    stats: dict[str, Any] = Field(
        ...,
        description=(
            "What the search did: stage timings (ms), corpus and arm sizes, arm availability, the arms skipped and why, "
            'the time the query names and the turns preferred for it (named_time, docs/retrieval.md "Named time").'
        ),
    )


class ContextItem(Schema):
    model_config = ConfigDict(extra="allow")
    layer: Literal["story", "chapter", "mental_model", "belief", "fact", "narrative", "lore"] = Field(
        ...,
        description="The memory layer (studio.memory.recall.layout.LAYERS); items come in the order the "
        "prompt prints them (the layout's sections).",
    )
    text: str
    tokens: int
    reason: str = ""
    why: dict[str, Any] = {}
    ref: dict[str, Any] = {}
    included: bool
    cut: str = Field(
        "", description="Why an item was left out whole (over budget or its layer's share); empty when included."
    )
    policy: dict[str, Any] = Field(
        {},
        description="Its budget policy: section, share class, offer tier and rank, recall, "
        "refill, protected, outside_budget, per_action (docs/architecture.md).",
    )


class LoreExplanation(Schema):
    model_config = ConfigDict(extra="allow")
    entry_id: str
    title: str
    included: bool = Field(
        ..., description="In the assembled context (activated or found by meaning, and within the budget)."
    )
    activated: bool = Field(..., description="Activated by the Lore Book's rules for the next turn.")
    code: str = Field(
        ..., description="The activation decision: constant, key, recursion, sticky, cooldown, ... (docs/lore.md)."
    )
    reasons: list[str] = Field(..., description="The activation decision in sentences.")
    matched_key: str = ""
    matched_in: str = Field(
        "", description="Where the key matched: the pending input, turn N, or an entry's text (recursion)."
    )
    via_entry: str = Field("", description="The entry whose text activated this one (recursion).")
    pass_index: Optional[int] = None
    roll: Optional[float] = Field(None, description="Probability roll (0-100) when one was drawn.")
    threshold: Optional[float] = Field(None, description="The entry's probability.")
    group: str = ""
    rivals: list[str] = Field([], description="Entry ids it won its inclusion group against, or lost to.")
    regex_timeouts: list[str] = Field(
        [], description="Regex keys whose search ran past its time limit (counted as not matching)."
    )
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
        [],
        description="Who is in focus, each once: `name` (a character's Lore Book title), `key`, `why`, the `term` "
        "that named it, the `entry_id` it resolved to and `by` what (its title, one of its keys, a part "
        "of its title), and every subject `keys` it answers to (docs/playtesting.md).",
    )
    token_budget: int
    used_tokens: int
    cut_tokens: int = 0
    items: list[ContextItem]
    text: str = Field(
        ...,
        description="The memory as the narrator's prompt carries it, byte for byte (the one renderer: "
        "sections, marks, story-time headings).",
    )
    text_tokens: int = Field(0, description="The tokens of `text` (the budget's counter).")
    parts: list[dict[str, Any]] = Field([], description="`text`'s sections in order: section, tokens, per_action.")
    policy: Optional[dict[str, Any]] = Field(
        None, description="Every knob the context was built with (studio.memory.recall.policy)."
    )
    timings: dict[str, float] = {}
    notes: list[str] = []
    shares: dict[str, int] = Field(
        {}, description="Budget share per class (percent of token_budget; Universe_Meta context_share_*)."
    )
    reserve_recall: int = Field(
        0,
        description="Percent of token_budget kept for what the action recalls until it has been "
        "offered (Universe_Meta context_reserve_recall; docs/long-play.md).",
    )
    cap_recall: int | None = Field(
        None,
        description="Percent of token_budget that what changes with each action (what it "
        "recalled, lore its turn activated) may use in all, or null: no cap "
        "(Universe_Meta context_cap_recall; docs/long-play.md).",
    )
    macros: dict[str, str] = Field({}, description="Who {{user}} and {{char}} are in the item texts.")
    queries: list[dict[str, Any]] = Field(
        [], description="The two vector queries (narrative, lore) as Lore replay records them."
    )
    lore_explain: list[LoreExplanation] = Field(
        ..., description="One record per entry of the save's Lore Book, in book order."
    )
    shown_turns: list[int] = Field(
        [],
        description="The turns the story so far shows in full (layer `chapter`: the open "
        "chapter's window), oldest first (docs/long-play.md).",
    )
    chapter_start: int = Field(1, description="The open chapter's first turn.")
    pov: Optional[dict[str, Any]] = Field(
        None,
        description="Who knows what: the characters on scene, their sections, the narrator-only items and "
        "one explain record per (item, character) (docs/knowledge.md).",
    )


class PromptOut(Schema):
    system: str
    user: str
    chars: int


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

"""The narrator's proposal in the API (`Narration`) and the continuity guard's findings it carries under
`continuity` (docs/continuity.md): the same shape `continuity_check` gives (`memory.continuity.findings`)."""

from __future__ import annotations

from typing import Any, Literal, Optional

from ninja import Schema
from pydantic import Field

from studio.api.schemas import MemoryContext, PromptOut

CONTINUITY_HELP = (
    "What the continuity guard found in the narrative (null when the universe turns it off); nothing is "
    "stored: the turn the engine appends is its own (docs/continuity.md)."
)


class FindingItem(Schema):
    layer: str = Field(..., description="lore, fact, belief, turn or presence.")
    ref: dict[str, Any]
    text: str
    turn: Optional[int] = Field(None, description="The item's turn (0: canon, the Lore Book).")
    label: str = Field(..., description='How the finding names the item: "lore secret-x", "fact 12", "turn 7".')


class Finding(Schema):
    kind: Literal["leak", "presence", "contradiction"]
    sentence: str
    character: str = Field(..., description="Who says or does it; empty for the narration itself.")
    item: FindingItem
    why: str
    verdict: Literal["found", "candidate", "confirmed", "rejected"] = Field(
        ...,
        description="found: a deterministic check; candidate: a possible contradiction not judged; confirmed / "
        "rejected: the model's verdict.",
    )
    judge: str = ""
    score: dict[str, Any] = {}


class Continuity(Schema):
    turn_id: int
    findings: list[Finding]
    notes: list[str]
    judged: bool
    calls: int
    mode: Literal["warn", "regenerate"] = Field(..., description="The universe's continuity_guard setting.")
    regenerated_from: Optional[dict[str, Any]] = Field(
        None,
        description='With "regenerate": the first narrative and its findings, when the findings made the '
        "narrator write the turn again with them as instructions (docs/continuity.md).",
    )


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
    continuity: Optional[Continuity] = Field(None, description=CONTINUITY_HELP)

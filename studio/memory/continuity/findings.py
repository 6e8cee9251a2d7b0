"""A finding as the checks make it (`Finding`, pure) and as a check returns them (`CheckResult`).

A finding always names the sentence, who says or does it ("" for the narration), the memory item
(its layer, a reference, its text and its turn: 0 for canon, the Lore Book) and why. `verdict` is
"found" for the deterministic checks (leaks, presence), "candidate" for a possible contradiction
the model has not judged, "confirmed" or "rejected" once it has.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

__all__ = ["CheckResult", "Finding", "Item", "REGENERATE_HEADING", "instructions_text"]

REGENERATE_HEADING = (
    "Continuity notes: a check of an earlier draft of this turn found these problems. Write the "
    "turn again and avoid every one of them:"
)


def instructions_text(instructions: list[str]) -> str:
    """The findings as the instructions a regenerated narration gets, after the action ("" for none)."""
    if not instructions:
        return ""
    return REGENERATE_HEADING + "\n" + "\n".join(f"- {line}" for line in instructions)


@dataclass(frozen=True)
class Item:
    """A memory item a sentence may conflict with."""

    layer: str  # lore | fact | belief | turn | presence
    ref: dict
    text: str
    turn: int | None  # 0: canon (the Lore Book); None: no turn

    def title(self) -> str:
        """What the item is about, without its words: "the secret “The Tide Code”", "what happened at turn 7"."""
        if self.layer == "lore":
            return f"the secret “{self.ref.get('title') or self.ref.get('entry_id', '')}”"
        if self.layer in ("fact", "turn"):
            return f"what happened at turn {self.turn}"
        return f"{self.layer} {self.turn}"

    def label(self) -> str:
        """How a finding names the item: "lore dace-sold", "fact 12", "belief 4", "turn 7"."""
        if self.layer == "lore":
            return f"lore {self.ref.get('entry_id', '')}"
        if self.layer in ("fact", "belief"):
            return f"{self.layer} {self.ref.get(self.layer + '_id', '')}"
        return f"{self.layer} {self.turn}"


@dataclass
class Finding:
    kind: str  # leak | presence | contradiction
    sentence: str
    character: str
    item: Item
    why: str
    verdict: str = "found"
    judge: str = ""  # the model's reason
    score: dict = field(default_factory=dict)  # the evidence (terms, similarity), for the bench and the explain

    @property
    def stands(self) -> bool:
        return self.verdict != "rejected"

    def as_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "sentence": self.sentence,
            "character": self.character,
            "item": {**asdict(self.item), "label": self.item.label()},
            "why": self.why,
            "verdict": self.verdict,
            "judge": self.judge,
            "score": self.score,
        }

    def instruction(self) -> str:
        """The finding as an instruction to the narrator (regenerate with the findings). A leak's instruction names
        what must stay unknown by its title or turn, never by its words: repeating a secret primes a small model to
        say it (bench/continuity_llm.py)."""
        if self.kind == "leak":
            who = self.character or (self.score.get("audience") or "the player character")
            return (
                f"{who} does not know {self.item.title()}. In this turn {who} knows nothing about it: asked, "
                f"{who} says they do not know, and neither {who} nor the narration reveals or guesses it."
            )
        if self.kind == "presence":
            return (
                f"{self.character} is not on scene: {self.character} does not speak or act in this turn unless the "
                "narration first brings them in."
            )
        return (
            f"Keep to what is established: {self.item.label()} (turn {self.item.turn}) says “{_short(self.item.text)}”; "
            f"the earlier draft said “{_short(self.sentence)}” ({self.judge or self.why})."
        )


def _short(text: str, limit: int = 220) -> str:
    text = " ".join(str(text or "").split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


@dataclass
class CheckResult:
    """What one check of a narration found, with what it read and how the judge went."""

    turn_id: int
    findings: list[Finding] = field(default_factory=list)
    sentences: list[dict] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    judged: bool = False  # the model judged the candidates
    calls: int = 0  # model calls made

    @property
    def standing(self) -> list[Finding]:
        """The findings that stand (not rejected by the model)."""
        return [f for f in self.findings if f.stands]

    def of_kind(self, kind: str) -> list[Finding]:
        return [f for f in self.standing if f.kind == kind]

    def as_dict(self) -> dict[str, Any]:
        return {
            "turn_id": self.turn_id,
            "findings": [f.as_dict() for f in self.findings],
            "notes": self.notes,
            "judged": self.judged,
            "calls": self.calls,
        }

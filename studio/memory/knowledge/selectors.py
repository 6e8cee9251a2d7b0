"""Reads for the who-knows-what pages, the API, lore health and the bench.

- `knowledge_at(save, turn)`: every character against every fact and every secret lore
  entry up to turn N, each cell a `Knowing` (the "Who knows what" page, the property tests);
- `character_timeline(save, character, turn)`: what a character learned, turn by turn, and
  how ("learned X at turn 12 from Kael");
- `knowledge_flags(save, turn)`: lore health's checks: secrets every character knows by N
  (no longer secrets), and facts nobody witnessed (no presence at their turn, no reveal).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from studio.memory.knowledge.derive import Knowing, KnowledgeView
from studio.memory.knowledge.names import fold

__all__ = ["KnowledgeTable", "book_entries", "knowledge_at", "character_timeline", "knowledge_flags"]


@dataclass
class KnowledgeTable:
    turn: int
    characters: list[str]
    facts: list[dict] = field(default_factory=list)  # {"fact", "cells": [Knowing per character]}
    secrets: list[dict] = field(default_factory=list)  # {"entry_id", "title", "known_by", "note", "cells"}
    presence: dict[int, list[str]] = field(default_factory=dict)

    def counts(self) -> dict[str, dict[str, int]]:
        """Per character: facts and secrets known."""
        out = {}
        for index, name in enumerate(self.characters):
            out[name] = {
                "facts": sum(1 for f in self.facts if f["cells"][index].known),
                "secrets": sum(1 for s in self.secrets if s["cells"][index].known),
            }
        return out


def knowledge_at(save, *, turn: int, characters: list[str] | None = None, fact_limit: int = 500) -> KnowledgeTable:
    """Return who knows which fact and which secret entry as of `turn` (facts newest first)."""
    from studio.memory.models import Fact
    from studio.world.models import LoreEntry

    view = KnowledgeView(save, horizon=turn)
    names = characters or view.characters()
    table = KnowledgeTable(
        turn=turn, characters=names, presence={t: r.characters for t, r in sorted(view.presence.items())}
    )
    for fact in Fact.objects.filter(game_save_id=save.pk, turn_id__lte=turn).order_by("-turn_id", "-id")[:fact_limit]:
        table.facts.append({"fact": fact, "cells": [view.fact(n, fact.pk, fact.turn_id) for n in names]})
    for entry_id, title, known_by in (
        LoreEntry.objects.filter(universe_id=save.universe_id, known_by__isnull=False)
        .order_by("title")
        .values_list("entry_id", "title", "known_by")
    ):
        if known_by is None:
            continue
        table.secrets.append(
            {
                "entry_id": entry_id,
                "title": title,
                "known_by": known_by,
                "note": view.secret_note(entry_id),
                "cells": [view.entry(n, entry_id) for n in names],
            }
        )
    return table


def character_timeline(save, *, character: str, turn: int) -> list[dict]:
    """Return what `character` learned up to `turn`, in turn order, with how (witnessed or told)."""
    from studio.memory.models import Fact

    view = KnowledgeView(save, horizon=turn)
    name = view.index.resolve(character)
    events: list[dict] = []
    for fact in Fact.objects.filter(game_save_id=save.pk, turn_id__lte=turn).order_by("turn_id", "id"):
        knowing = view.fact(name, fact.pk, fact.turn_id)
        if knowing.known:
            events.append(
                {
                    "turn": knowing.learned_turn or fact.turn_id,
                    "kind": "fact",
                    "text": fact.statement,
                    "how": knowing.why,
                    "fact_id": fact.pk,
                }
            )
    for reveal in view.reveals:
        if reveal.entry_id and fold(reveal.character) == fold(name):
            title = view.index.entry_titles.get(reveal.entry_id, reveal.entry_id)
            by = f" from {reveal.told_by}" if reveal.told_by else ""
            events.append(
                {
                    "turn": reveal.turn_id,
                    "kind": "lore",
                    "text": title,
                    "how": f"learned at turn {reveal.turn_id}{by}",
                    "entry_id": reveal.entry_id,
                }
            )
    for entry_id, known_by in view.known_by.items():
        if (
            known_by is not None
            and view.entry(name, entry_id).known
            and view.entry(name, entry_id).learned_turn is None
        ):
            events.append(
                {
                    "turn": 0,
                    "kind": "lore",
                    "text": view.index.entry_titles.get(entry_id, entry_id),
                    "how": view.entry(name, entry_id).why + " (from the start)",
                    "entry_id": entry_id,
                }
            )
    events.sort(key=lambda e: (e["turn"], e["kind"], e["text"]))
    return events


def knowledge_flags(save, *, turn: int) -> dict[str, list[dict]]:
    """Return lore health's who-knows-what flags for `save` as of `turn`."""
    from studio.memory.models import Fact

    view = KnowledgeView(save, horizon=turn)
    names = view.characters()
    public_secrets = []
    for entry_id, known_by in view.known_by.items():
        if known_by is None or not names:
            continue
        cells = [view.entry(n, entry_id) for n in names]
        if all(c.known for c in cells):
            public_secrets.append(
                {
                    "entry_id": entry_id,
                    "title": view.index.entry_titles.get(entry_id, entry_id),
                    "note": view.secret_note(entry_id),
                }
            )
    unwitnessed = []
    for fact in Fact.objects.filter(game_save_id=save.pk, turn_id__lte=turn).order_by("turn_id", "id"):
        if not view.present.get(fact.turn_id) and not view.fact_reveals.get(fact.pk):
            unwitnessed.append({"fact_id": fact.pk, "turn_id": fact.turn_id, "statement": fact.statement})
    return {"public_secrets": public_secrets, "unwitnessed_facts": unwitnessed}


def book_entries(universe_id: int) -> dict[str, dict]:
    """Return the Lore Book's entries by id ({"entry_id", "title", "text", "kind", "keys", "known_by"}), book order:
    canon and secrets for the continuity guard."""
    from studio.world.models import LoreEntry

    rows = (
        LoreEntry.objects.filter(universe_id=universe_id)
        .order_by("pk")
        .values("entry_id", "title", "text", "kind", "keys", "known_by")
    )
    return {row["entry_id"]: row for row in rows}


def knowing_as_tuple(knowing: Knowing) -> tuple[bool, str]:
    return (knowing.known, knowing.why)

"""The save file's `presence` and `reveals` sections (optional; registered by `SavesConfig.ready()`).

`presence`: one item per Presence row, in turn order::

    {"turn_id": 3, "characters": ["Mira", "Kael"], "source": "state", "scene": "the harbour"}

`reveals`: one item per Reveal row, in turn order; a fact is named by its file id in the
`facts` section (a reveal of a fact the save no longer holds is left out, as a fork does)::

    {"turn_id": 20, "fact": 12, "entry_id": "", "character": "Mira", "told_by": "Kael", "source": "playtester"}

Both are optional: a studio without them imports the file without who-knows-what, and a file
exported before they existed imports with none (knowledge is then derived from nothing:
no character knows a fact, and lore keeps its `known_by`).
"""

from __future__ import annotations

from collections.abc import Iterator

from studio.memory.knowledge.models import Presence, PresenceSource, Reveal, RevealSource
from studio.saves.portable.registry import CheckContext, ExportContext, ImportContext, SaveSection


def export_presence(ctx: ExportContext) -> Iterator[dict]:
    for row in Presence.objects.filter(game_save_id=ctx.game_save.pk).order_by("turn_id"):
        yield {"turn_id": row.turn_id, "characters": list(row.characters), "source": row.source, "scene": row.scene}


def check_presence(items: list, ctx: CheckContext, where: str) -> list[dict]:
    c = ctx.checker
    spec = {
        "turn_id": lambda v, loc: ctx.turn(v, loc, first=1),
        "characters": lambda v, loc: c.names(v, loc, max_items=100, field="character.name"),
        "source": lambda v, loc: c.choice(v, loc, PresenceSource.values),
        "scene": lambda v, loc: c.text(v, loc, max_length=300),
    }
    return [item for _loc, item in ctx.complete_records(items, where, spec, one_per_turn="presence")]


def load_presence(items: list[dict], ctx: ImportContext) -> int:
    Presence.objects.bulk_create([Presence(game_save=ctx.game_save, **item) for item in items], batch_size=1000)
    return len(items)


def export_reveals(ctx: ExportContext) -> Iterator[dict]:
    fact_ids = ctx.file_ids.get("facts", {})
    for row in Reveal.objects.filter(game_save_id=ctx.game_save.pk).order_by("turn_id", "id"):
        if row.fact_id and row.fact_id not in fact_ids:
            continue
        yield {
            "turn_id": row.turn_id,
            "fact": fact_ids[row.fact_id] if row.fact_id else None,
            "entry_id": row.entry_id,
            "character": row.character,
            "told_by": row.told_by,
            "source": row.source,
        }


def check_reveals(items: list, ctx: CheckContext, where: str) -> list[dict]:
    c = ctx.checker
    spec = {
        "turn_id": lambda v, loc: ctx.turn(v, loc, first=1),
        "fact": lambda v, loc: None if v is None else ctx.reference(v, loc, "facts", what="fact"),
        "entry_id": lambda v, loc: c.text(v, loc, max_length=120),
        "character": lambda v, loc: c.limited(v, loc, "character.name"),
        "told_by": lambda v, loc: v if v == "" else c.limited(v, loc, "character.name"),
        "source": lambda v, loc: c.choice(v, loc, RevealSource.values),
    }
    out = []
    for loc, item in ctx.complete_records(items, where, spec):
        if (item["fact"] is None) == (not item["entry_id"]):
            c.add(loc, "a reveal names one fact or one lore entry")
            continue
        if item["fact"] is not None and ctx.ids["facts"][item["fact"]] > item["turn_id"]:
            c.add(f"{loc}.fact", f"fact {item['fact']} is from a later turn than the reveal")
            continue
        out.append(item)
    return out


def load_reveals(items: list[dict], ctx: ImportContext) -> int:
    fact_pks = ctx.db_ids.get("facts", {})
    Reveal.objects.bulk_create(
        [
            Reveal(
                game_save=ctx.game_save,
                turn_id=i["turn_id"],
                fact_id=fact_pks[i["fact"]] if i["fact"] else None,
                entry_id=i["entry_id"] or "",
                character=i["character"],
                told_by=i["told_by"],
                source=i["source"],
            )
            for i in items
        ],
        batch_size=1000,
    )
    return len(items)


PRESENCE_SECTION = SaveSection("presence", 1, export_presence, check_presence, load_presence, optional=True)
REVEALS_SECTION = SaveSection("reveals", 1, export_reveals, check_reveals, load_reveals, optional=True)

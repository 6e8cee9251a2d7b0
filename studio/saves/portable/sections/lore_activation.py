"""The save file's `lore_activation` section: the per-save activation state, turn by turn.

Registered by `SavesConfig.ready()` through the save file's section registry
(`studio.saves.portable.register_section`), beside the narrator's optional section.
One item per LoreActivation row, in turn order::

    {"turn_id": 3, "state": {"sticky": {...}, "cooldown": {...}, "first_matched": {...}},
     "activated": ["bell"], "sequence": ["bell"]}

A save file holds no save id or database id, so the rows' `seed` (it names the lineage
root's save id) and `book_version` (the universe's pk) stay out: an imported row keeps what
activated and the state it left, with an empty seed; the imported save draws its own rolls
from its next turn on. The section is optional: a studio without it imports the file and
loses only this state. A file without the section (exported before it existed) imports with
the rows recomputed from its turns (`lore_activation_replay`) against the universe's
current Lore Book; a file whose section is present but empty imports no rows.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from studio.memory.lore_activation import LoreState
from studio.memory.lore.activation_state import lore_activation_replay
from studio.memory.models import LoreActivation
from studio.saves.portable.registry import INVALID, CheckContext, ExportContext, ImportContext, SaveSection

SECTION = "lore_activation"
FIELDS = ("turn_id", "state", "activated", "sequence")
MAX_IDS = 10_000


class _Checked(list):
    """The checked items of a file that has the section (a file without it is loaded with a plain [])."""


def export_lore_activation(ctx: ExportContext) -> Iterator[dict]:
    rows = LoreActivation.objects.filter(game_save_id=ctx.game_save.pk).order_by("turn_id")
    for row in rows.iterator(chunk_size=500):
        yield {name: getattr(row, name) for name in FIELDS}


def check_lore_activation(items: list, ctx: CheckContext, where: str) -> list[dict]:
    c = ctx.checker

    def ids(value: Any, loc: str):
        return c.names(value, loc, max_items=MAX_IDS, max_length=200)

    def state(value: Any, loc: str):
        value = c.mapping(value, loc)
        if value is INVALID:
            return value
        unknown = set(value) - {"sticky", "cooldown", "first_matched"}
        if unknown:
            c.add(
                loc,
                f"holds {', '.join(sorted(unknown))}; a lore activation state has sticky, cooldown and first_matched",
            )
            return INVALID
        try:
            parsed = LoreState.from_dict(value)
        except (TypeError, ValueError, IndexError, AttributeError) as exc:
            c.add(loc, f"is not a lore activation state ({type(exc).__name__}: {str(exc)[:80]})")
            return INVALID
        return parsed.to_dict()

    spec = {
        "turn_id": lambda v, loc: ctx.turn(v, loc, first=1),
        "state": state,
        "activated": ids,
        "sequence": ids,
    }
    return _Checked(item for _loc, item in ctx.complete_records(items, where, spec, one_per_turn="activation"))


def load_lore_activation(items: list[dict], ctx: ImportContext) -> int:
    save = ctx.game_save
    if not isinstance(items, _Checked):
        # A file from before this section: recompute from the imported turns.
        return lore_activation_replay(save=save) if save.current_turn else 0
    LoreActivation.objects.bulk_create(
        [LoreActivation(game_save=save, **{name: item[name] for name in FIELDS}) for item in items], batch_size=500
    )
    return len(items)


LORE_ACTIVATION_SECTION = SaveSection(
    SECTION,
    1,
    export_lore_activation,
    check_lore_activation,
    load_lore_activation,
    optional=True,
)

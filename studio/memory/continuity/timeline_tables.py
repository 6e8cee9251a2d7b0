"""Continuity findings in the timeline registry (registered by `MemoryConfig.ready()`).

A finding never changes once its turn is gone: a rewind to N deletes the findings of the turns
after N (a draft's findings are for the turn after the current one: they go with the draft), a
fork copies those up to N (every column), the save file's `continuity_findings` section carries them. A finding
that cites a fact or a belief is copied citing the fork's copy of it (`ForkContext.ids`; order 85
runs after facts and beliefs), so the fork's findings name the fork's own rows.
"""

from __future__ import annotations

from studio.memory import timeline, turn_rows
from studio.memory.continuity.models import ContinuityFinding

REF_TABLES = {"fact": ("facts", "fact_id"), "belief": ("beliefs", "belief_id")}


def remap_ref(layer: str, ref: dict, ids: dict[str, dict[int, int]]) -> dict:
    """Return `ref` citing the row its fact or belief became (`ids[table]`: old pk -> new pk); unchanged otherwise,
    the id dropped when the row has no copy."""
    table, key = REF_TABLES.get(layer, (None, None))
    if table is None or key not in (ref or {}):
        return dict(ref or {})
    new = ids.get(table, {}).get(int(ref[key]))
    out = {k: v for k, v in ref.items() if k != key}
    if new is not None:
        out[key] = new
    return out


def remap_item_ref(value, row: dict, ctx: timeline.ForkContext) -> dict:
    """A fork's copy of a finding cites the fork's copy of its fact or belief (`remaps` of `item_ref`)."""
    return remap_ref(row["item_layer"], value, {table: ctx.ids_of(table) for table, _key in REF_TABLES.values()})


def count_findings(save, n: int) -> dict[str, int]:
    """The findings of the turns a rewind to N drops; a draft's (the turn after the current one) are not counted,
    as its draft is not."""
    return {
        "continuity_findings": ContinuityFinding.objects.filter(
            game_save_id=save.pk, turn_id__gt=n, turn_id__lte=save.current_turn
        ).count()
    }


def roll_back_findings(save, n: int) -> dict[str, int]:
    counted = count_findings(save, n)
    turn_rows.delete_after(ContinuityFinding, save.pk, n)
    return counted


TABLE = timeline.TurnTable(
    name="continuity_findings",
    model=ContinuityFinding,
    rollback=roll_back_findings,
    count=count_findings,
    copy=timeline.copy_columns(ContinuityFinding, remaps={"item_ref": remap_item_ref}),
    section="continuity_findings",
    order=85,
    labels={"continuity_findings": "Continuity findings"},
)


def register() -> None:
    timeline.register_table(TABLE)

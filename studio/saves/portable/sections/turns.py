"""The `turns` section: one item per turn, with its state and the time it was played."""

from __future__ import annotations

from typing import Iterator

from studio.world.models import Event, StateCache
from studio.saves.portable.registry import CheckContext, ExportContext, ImportContext
from studio.saves.portable.sections.rows import BATCH, iso, insert_rows, _readers


def export_turns(ctx: ExportContext) -> Iterator[dict]:
    pk = ctx.game_save.pk
    states = (
        StateCache.objects.filter(game_save_id=pk)
        .order_by("turn_id")
        .values_list("turn_id", "state")
        .iterator(chunk_size=BATCH)
    )
    pending = next(states, None)
    events = Event.objects.filter(game_save_id=pk).order_by("turn_id")
    for event in events.values_list("turn_id", "player_input", "narrative", "created_at", "edited_at").iterator(
        chunk_size=BATCH
    ):
        turn_id, player_input, narrative, created_at, edited_at = event
        while pending is not None and pending[0] < turn_id:
            pending = next(states, None)  # a state without its turn is not part of the save
        state = None
        if pending is not None and pending[0] == turn_id:
            state = pending[1]
            pending = next(states, None)
        item = {
            "turn_id": turn_id,
            "player_input": player_input,
            "narrative": narrative,
            "created_at": iso(created_at),
            "state": state,
        }
        if edited_at is not None:  # only then: a file of unedited turns reads as it always did
            item["edited_at"] = iso(edited_at)
        yield item


def check_turns(items: list, ctx: CheckContext, where: str) -> list[dict]:
    r = _readers(ctx)
    spec = {
        "turn_id": r["int"](minimum=1),
        "player_input": r["limited"]("turn.player_input"),
        "narrative": r["limited"]("turn.narrative"),
        "created_at": r["time"](),
        "state": r["object"](nullable=True),
        "edited_at": r["time"](),
    }
    out = []
    turns = ctx.ids.setdefault("turns", {})
    for index, raw in enumerate(items):
        loc = f"{where}[{index}]"
        item = ctx.checker.record(raw, loc, spec, optional=("edited_at",))
        if item is None:
            continue
        expected = index + 1
        if "turn_id" in item and item["turn_id"] != expected:
            ctx.checker.add(
                f"{loc}.turn_id",
                f"turns must be numbered 1, 2, 3… in order: expected turn {expected} here, found turn {item['turn_id']}",
            )
            continue
        turns[expected] = (item.get("player_input", ""), item.get("narrative", ""))  # for `rows.from_turn`
        out.append(item)
    if len(items) != ctx.current_turn:
        ctx.checker.add(
            where,
            f"holds {len(items)} turns but save.current_turn is {ctx.current_turn}; "
            "a save holds every turn from 1 to its current turn",
        )
    return out


def load_turns(items: list[dict], ctx: ImportContext) -> int:
    pk = ctx.game_save.pk
    insert_rows(
        Event,
        (
            {
                "game_save_id": pk,
                "edited_at": i.get("edited_at"),
                **{k: i[k] for k in ("turn_id", "player_input", "narrative", "created_at")},
            }
            for i in items
        ),
    )
    insert_rows(
        StateCache,
        ({"game_save_id": pk, "turn_id": i["turn_id"], "state": i["state"]} for i in items if i["state"] is not None),
    )
    return len(items)


# -- facts -----------------------------------------------------------------------------------

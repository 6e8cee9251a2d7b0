"""The `narrator_snapshots` section of the save file: what the narrator saw at each turn.

One item per snapshot, in turn order, with every field of `NarratorSnapshot` but the ids
(`context` is the memory context as it was recorded: `MemoryContext.as_dict()`;
`play_settings` the author's note and sampler settings, optional: older files lack it). Optional:
a studio without the narrator imports the file without them (with a warning). Each turn
has at most one snapshot, and it must be a turn of the file.

The `play_settings` section carries the save's own `PlaySettings` (the author's note and its
depth, the sampler overrides; `null` where the save does not override): one item, or none
when the save has no settings. Checked with the play settings' own limits, each problem at its
location; optional, and a file without it (exported before it existed) imports with none.
Every setting is read with its declared limit (`studio/limits.py`), as the API and the page do.
"""
from __future__ import annotations

from typing import Iterator

from studio.saves.models import NarratorSnapshot, PlaySettings
from studio.saves.narrator.authors_note import play_settings_of
from studio.saves.narrator.sampler import FIELDS as SAMPLER_FIELDS
from studio.saves.portable.registry import INVALID, CheckContext, ExportContext, ImportContext, SaveSection
from studio.saves.portable.sections.rows import BATCH, _items, _readers, insert_rows, iso

NAME = "narrator_snapshots"
TEXT_FIELDS = ("player_input", "proposed", "model", "finish_reason", "system_prompt", "user_prompt")
COUNT_FIELDS = ("alternatives", "latency_ms", "prompt_tokens", "completion_tokens", "prompt_chars")


def export_snapshots(ctx: ExportContext) -> Iterator[dict]:
    rows = NarratorSnapshot.objects.filter(game_save_id=ctx.game_save.pk).order_by("turn_id")
    for row in rows.iterator(chunk_size=BATCH):
        yield {
            "turn_id": row.turn_id,
            **{name: getattr(row, name) for name in TEXT_FIELDS},
            "edited": row.edited,
            **{name: getattr(row, name) for name in COUNT_FIELDS},
            "context": row.context or {},
            "play_settings": row.play_settings or {},
            "created_at": iso(row.created_at),
        }


def check_snapshots(items: list, ctx: CheckContext, where: str) -> list[dict]:
    r = _readers(ctx)
    c = ctx.checker
    seen: set[int] = set()

    def turn(value, loc):
        value = ctx.turn(value, loc, first=1)
        if value is not INVALID and value in seen:
            c.add(loc, f"turn {value} has two narrator snapshots")
            return INVALID
        if value is not INVALID:
            seen.add(value)
        return value

    spec = {
        "turn_id": turn,
        **{name: r["text"](max_length=200 if name in ("model", "finish_reason") else None) for name in TEXT_FIELDS},
        "edited": r["bool"](),
        **{name: r["int"]() for name in COUNT_FIELDS},
        "context": r["object"](),
        "play_settings": r["object"](),
        "created_at": r["time"](),
    }
    optional = ("play_settings",)
    return [item for _loc, item in _items(ctx, items, where, spec, optional=optional)
            if all(key in item for key in spec if key not in optional)]


def load_snapshots(items: list[dict], ctx: ImportContext) -> int:
    insert_rows(NarratorSnapshot, ({"game_save_id": ctx.game_save.pk, **item} for item in items))
    return len(items)


SECTION = SaveSection(
    name=NAME, version=1, order=80, optional=True,
    export=export_snapshots, check=check_snapshots, load=load_snapshots,
)


# -- play settings ---------------------------------------------------------------------------

PLAY_SETTINGS = "play_settings"


def export_play_settings(ctx: ExportContext) -> Iterator[dict]:
    row = play_settings_of(ctx.game_save)  # the one read of the row (authors_note.play_settings_of)
    if row is not None:
        yield {"authors_note": row.authors_note, "authors_note_depth": row.authors_note_depth,
               **{name: getattr(row, name) for name in SAMPLER_FIELDS}}


def check_play_settings(items: list, ctx: CheckContext, where: str) -> list[dict]:
    c = ctx.checker
    if len(items) > 1:
        c.add(where, f"holds {len(items)} items; a save has one set of play settings")
        return []

    spec = {"authors_note": lambda value, loc: c.limited(value, loc, "play.authors_note"),
            "authors_note_depth": lambda value, loc: c.limited(value, loc, "play.authors_note_depth"),
            **{name: (lambda field: lambda value, loc: c.limited(value, loc, field))(f"play.{name}")
               for name in SAMPLER_FIELDS}}
    # A sampler setting missing from the item (a file from before it existed) is not overridden.
    return [{**dict.fromkeys(SAMPLER_FIELDS), **item}
            for _loc, item in _items(ctx, items, where, spec, optional=SAMPLER_FIELDS)
            if all(key in item for key in spec if key not in SAMPLER_FIELDS)]


def load_play_settings(items: list[dict], ctx: ImportContext) -> int:
    for item in items:
        PlaySettings.objects.create(game_save=ctx.game_save, **item)
    return len(items)


PLAY_SETTINGS_SECTION = SaveSection(
    name=PLAY_SETTINGS, version=1, order=85, optional=True,
    export=export_play_settings, check=check_play_settings, load=load_play_settings,
)

"""The `narrator_snapshots` section of the save file: what the narrator saw at each turn.

One item per snapshot, in turn order, with every field of `NarratorSnapshot` but the ids
(`context` is the memory context as it was recorded: `MemoryContext.as_dict()`;
`play_settings` the author's note and sampler settings, optional: older files lack it). Optional:
a studio without the narrator imports the file without them (with a warning). Each turn
has at most one snapshot, and it must be a turn of the file.

So that a file grows with the chat and not with its square (`narrator/snapshots.py`), an
item's prompt is `prompt_delta` (`{system, user}` operations against the previous item's
whole prompt and the file's texts of the turn before and of its own input; `system_prompt` and `user_prompt` then empty; a file without it, exported
before deltas, holds whole prompts), `player_input` and `proposed` are null when they are the
turn's own input and narrative (`rows.as_turn_text`), and its `context` (version 2) is written
against what the file already holds (`saves/portable/recorded.py`: each candidate against its
last version by its ref, long strings as deltas of the prompts). Every delta is checked
against what it copies from and rebuilt on import, where the database keeps the whole context
and the prompt's delta as written. Version 1 (each context against the previous item's only,
`snapshots.context_decode`) is still read.

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
from studio.saves.narrator.snapshots import (
    SEPARATOR,
    Reference,
    context_decode,
    prompt_delta,
    prompt_delta_problem,
    prompt_from,
    prompt_reference,
)
from studio.saves.portable.recorded import RecordCodec, VerifiedWriter
from studio.saves.portable.registry import INVALID, CheckContext, ExportContext, ImportContext, SaveSection
from studio.saves.portable.sections.rows import (
    BATCH,
    INPUT,
    NARRATIVE,
    _items,
    _readers,
    as_turn_text,
    from_turn_text,
    insert_rows,
    iso,
    turn_texts,
)

NAME = "narrator_snapshots"
TEXT_FIELDS = ("model", "finish_reason")
COUNT_FIELDS = ("alternatives", "latency_ms", "prompt_tokens", "completion_tokens", "prompt_chars")


def export_snapshots(ctx: ExportContext) -> Iterator[dict]:
    texts = turn_texts(ctx.game_save)  # the input and the proposal are most often the turn's own: null
    previous_prompts: tuple[str, str] | None = None
    previous_context = None
    writer = VerifiedWriter()  # each context against the file's last version of each item (portable/recorded.py)
    rows = NarratorSnapshot.objects.filter(game_save_id=ctx.game_save.pk).order_by("turn_id")
    for row in rows.iterator(chunk_size=BATCH):
        prompts = prompt_from(row, previous_prompts)  # whole, from the database's delta
        # The file's delta also copies from the turns' texts it carries (the chat's newest messages).
        # Always a delta in the file (the first against nothing): literals are cut under the file's string limit.
        delta = prompt_delta(*prompts, previous_prompts or ("", ""), extra=_turns_text(texts, row.turn_id))
        context = row.context or {}
        reference = _context_reference(previous_prompts, prompts)
        (encoded,) = writer.write([context], [previous_context], Reference(reference), reference)
        yield {
            "turn_id": row.turn_id,
            **{name: getattr(row, name) for name in TEXT_FIELDS},
            "player_input": as_turn_text(row.player_input, texts, row.turn_id, INPUT),
            "proposed": as_turn_text(row.proposed, texts, row.turn_id, NARRATIVE),
            "system_prompt": "" if delta else prompts[0],
            "user_prompt": "" if delta else prompts[1],
            "prompt_delta": delta,
            "edited": row.edited,
            **{name: getattr(row, name) for name in COUNT_FIELDS},
            "context": encoded,
            "play_settings": row.play_settings or {},
            "created_at": iso(row.created_at),
        }
        previous_prompts, previous_context = prompts, context


def _context_reference(previous: tuple[str, str] | None, prompts: tuple[str, str]) -> str:
    """What a snapshot's context copies from: the previous snapshot's prompt, then its own."""
    return f"{prompt_reference(*(previous or ('', '')))}{SEPARATOR}{prompt_reference(*prompts)}"


def _turns_text(texts, turn_id: int) -> str:
    """The turns' texts a snapshot's delta in the file may copy from: the turn before (its narration) and its own input."""
    before, own = texts.get(turn_id - 1, ("", "")), texts.get(turn_id, ("", ""))
    return SEPARATOR.join((before[NARRATIVE], own[INPUT]))


def check_snapshots(items: list, ctx: CheckContext, where: str) -> list[dict]:
    r = _readers(ctx)
    c = ctx.checker
    seen: set[int] = set()

    def turn(value, loc):
        value = ctx.turn(value, loc, first=1)
        if value is not INVALID and value in seen:
            c.add(loc, f"turn {value} has two narrator snapshots")
            return INVALID
        if value is not INVALID and seen and value < max(seen):
            c.add(
                loc,
                f"turn {value} comes after turn {max(seen)}: snapshots are in turn order (each copies from the one before)",
            )
            return INVALID
        if value is not INVALID:
            seen.add(value)
        return value

    spec = {
        "turn_id": turn,
        **{
            name: r["text"](max_length=200 if name in ("model", "finish_reason") else None)
            for name in (*TEXT_FIELDS, "system_prompt", "user_prompt")
        },
        "prompt_delta": lambda value, loc: value if value is None else c.mapping(value, loc),
        **{
            name: (lambda value, loc: value if value is None else c.text(value, loc))
            for name in ("player_input", "proposed")
        },
        "edited": r["bool"](),
        **{name: r["int"]() for name in COUNT_FIELDS},
        "context": r["object"](),
        "play_settings": r["object"](),
        "created_at": r["time"](),
    }
    optional = ("play_settings", "prompt_delta")
    cleaned = []
    previous_prompts, previous_context = None, None
    codec = RecordCodec()
    for loc, item in _items(ctx, items, where, spec, optional=optional):
        if not all(key in item for key in spec if key not in optional):
            continue
        for name, which in (("player_input", INPUT), ("proposed", NARRATIVE)):
            item[name] = from_turn_text(ctx, item[name], f"{loc}.{name}", item["turn_id"], which)
        own = ctx.ids.get("turns", {})
        extra = _turns_text(
            {turn: own[turn] for turn in (item["turn_id"] - 1, item["turn_id"]) if isinstance(own.get(turn), tuple)},
            item["turn_id"],
        )
        prompts = _read_prompts(c, loc, item, previous_prompts, extra)
        if prompts is None or INVALID in (item["player_input"], item["proposed"]):
            continue
        # The database keeps the delta against the earlier snapshot alone (snapshots.snapshot_create's).
        item["prompt_delta"] = prompt_delta(*prompts, previous_prompts)
        item["system_prompt"], item["user_prompt"] = ("", "") if item["prompt_delta"] else prompts
        reference = _context_reference(previous_prompts, prompts)
        try:
            if ctx.version < 2:  # written before version 2: against the previous snapshot only
                item["context"] = context_decode(item["context"], previous_context, reference)
            else:
                if RecordCodec.reset_at(item["context"]):
                    codec = RecordCodec()
                item["context"] = codec.decode(item["context"], previous_context, reference)
        except ValueError as exc:
            c.add(f"{loc}.context", str(exc))
            continue
        if not isinstance(item["context"], dict):
            c.add(f"{loc}.context", "must be an object")
            continue
        cleaned.append(item)
        previous_prompts, previous_context = prompts, item["context"]
    return cleaned


def _read_prompts(c, loc: str, item: dict, previous: tuple[str, str] | None, extra: str) -> tuple[str, str] | None:
    """Return the item's whole prompts (its delta rebuilt), or None after recording the problem."""
    delta = item.get("prompt_delta")
    if delta is None:
        return item["system_prompt"], item["user_prompt"]
    previous = previous or ("", "")  # the first snapshot's delta copies from the turns' texts alone
    if set(delta) != {"system", "user"} or item["system_prompt"] or item["user_prompt"]:
        c.add(f"{loc}.prompt_delta", "holds {system, user}, and then system_prompt and user_prompt are empty")
        return None
    problem = prompt_delta_problem(delta, previous, extra=extra)
    if problem:
        c.add(f"{loc}.prompt_delta", problem)
        return None
    return prompt_from(item, previous, extra=extra)


def load_snapshots(items: list[dict], ctx: ImportContext) -> int:
    insert_rows(NarratorSnapshot, ({"game_save_id": ctx.game_save.pk, **item} for item in items))
    return len(items)


SECTION = SaveSection(
    name=NAME,
    version=2,
    reads=(1,),
    optional=True,
    export=export_snapshots,
    check=check_snapshots,
    load=load_snapshots,
)


# -- play settings ---------------------------------------------------------------------------

PLAY_SETTINGS = "play_settings"


def export_play_settings(ctx: ExportContext) -> Iterator[dict]:
    row = play_settings_of(ctx.game_save)  # the one read of the row (authors_note.play_settings_of)
    if row is not None:
        yield {
            "authors_note": row.authors_note,
            "authors_note_depth": row.authors_note_depth,
            **{name: getattr(row, name) for name in SAMPLER_FIELDS},
        }


def check_play_settings(items: list, ctx: CheckContext, where: str) -> list[dict]:
    c = ctx.checker
    if len(items) > 1:
        c.add(where, f"holds {len(items)} items; a save has one set of play settings")
        return []

    spec = {
        "authors_note": lambda value, loc: c.limited(value, loc, "play.authors_note"),
        "authors_note_depth": lambda value, loc: c.limited(value, loc, "play.authors_note_depth"),
        **{
            name: (lambda field: lambda value, loc: c.limited(value, loc, field))(f"play.{name}")
            for name in SAMPLER_FIELDS
        },
    }
    # A sampler setting missing from the item (a file from before it existed) is not overridden.
    return [
        {**dict.fromkeys(SAMPLER_FIELDS), **item}
        for _loc, item in _items(ctx, items, where, spec, optional=SAMPLER_FIELDS)
        if all(key in item for key in spec if key not in SAMPLER_FIELDS)
    ]


def load_play_settings(items: list[dict], ctx: ImportContext) -> int:
    for item in items:
        PlaySettings.objects.create(game_save=ctx.game_save, **item)
    return len(items)


PLAY_SETTINGS_SECTION = SaveSection(
    name=PLAY_SETTINGS,
    version=1,
    order=82,
    optional=True,
    export=export_play_settings,
    check=check_play_settings,
    load=load_play_settings,
)

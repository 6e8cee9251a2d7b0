"""Narrator snapshots stored as deltas: what the narrator saw at each turn, without the square.

A front end sends its whole chat with every message, so the prompt of turn N holds the
prompts of every turn before it: stored whole, a chat's snapshots grow with the square of
its length (a 12-turn chat made a 3 MB save file, and one 211,529-character snapshot that its
own import refused). So a snapshot stores its prompt as a **delta** of the nearest earlier
snapshot of the save (`NarratorSnapshot.prompt_delta`, `system_prompt` / `user_prompt` then
empty): a list of operations, each either a literal string or `[start, length]`, a copy of
that span of the earlier snapshot's prompt (its system message, NUL, its user message; the
system message may also copy from its own user message after another NUL). What
the earlier prompt already held (the front end's system prompt, the chat so far, a window
of it that slid along) is a copy of a few numbers; only what is new is text.

`delta_encode(text, reference)` finds the copies the way rsync does: the reference is indexed
by its `GRAM`-character pieces at every `GRAM`-th position, the text is scanned for them, and
a hit is extended both ways (a copy shorter than `MIN_COPY` stays literal); a copy that goes on
where the last one ended is tried first, so a prompt that extends the previous one is a
handful of operations. Literals are cut at `MAX_LITERAL` characters, under the save file's
limit on one string. `delta_decode(ops, reference)` is the inverse, exactly.

Invariants: a snapshot's delta refers only to the nearest earlier snapshot of its save, which
outlives it (a rewind to N deletes the snapshots after N; a fork copies those up to N, the
chain with them; a save file carries them in turn order). Reading a snapshot therefore reads
the snapshots before it back to the nearest one stored whole (one query, `snapshot_prompts`
from `chain_start`); `snapshot_create` stores one whole when the nearest whole one is
`KEYFRAME_EVERY` turns back, so that read is at most that many rows however long the save (a
process whose cache lacks the previous prompt: another web process, a restart). The latest
prompts resolved are kept in a small per-process cache, so an accept, which writes the next
delta, reads one row.

The save file uses the same deltas (`narrator/portable.py`); a snapshot's memory context is
written against what the file already holds (`saves/portable/recorded.py`: the last version
of each item by its ref, long strings as deltas of the prompts, whose quotes they are), so the
file grows with the chat, not with its square. `context_decode` reads the contexts of files
written before that (version 1 of the section).
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from typing import Any

from studio.saves.models import NarratorSnapshot

GRAM = 16  # characters of an index piece
MIN_COPY = 32  # a shorter match is kept as text: a copy costs about as much to write down
MAX_LITERAL = 100_000  # the save file refuses longer strings (PortableLimits.max_text_chars)
MIN_DELTA_STRING = 64  # a shorter string of a context is written as it is
SEPARATOR = "\x00"  # between a prompt's two messages in a reference (no stored text holds NUL)
CACHE_SIZE = 16
# A snapshot is stored whole when the nearest whole one is this many turns back: reading any
# snapshot (a process whose cache lacks the previous one) then reads at most this many rows.
KEYFRAME_EVERY = 32


class Reference:
    """A text to copy from, indexed for `delta_encode` on first use."""

    def __init__(self, text: str):
        self.text = text
        self._index: dict[str, int] | None = None

    @property
    def index(self) -> dict[str, int]:
        if self._index is None:
            index: dict[str, int] = {}
            text = self.text
            for position in range(0, len(text) - GRAM + 1, GRAM):
                index.setdefault(text[position : position + GRAM], position)
            self._index = index
        return self._index


def _common(a: str, i: int, b: str, j: int) -> int:
    """Return how many characters a[i:] and b[j:] share from their start.

    The pieces compared start small and double (to 4,096): most calls, at a position of new text, share a few
    characters, and slicing 4,096 of both texts at each such position made the encode O(new text x 8 KB)."""
    count, step = 0, 64
    while True:
        x, y = a[i + count : i + count + step], b[j + count : j + count + step]
        if x == y:
            if len(x) < step:
                return count + len(x)
            count += step
            step = min(step * 2, 4096)
            continue
        return count + len(os.path.commonprefix([x, y]))


def delta_encode(text: str, reference: Reference | str) -> list:
    """Return the operations that rebuild `text` from `reference` (see the module docstring)."""
    ref = reference if isinstance(reference, Reference) else Reference(reference)
    source = ref.text
    ops: list = []
    literal = 0  # where the text not yet written down starts
    i, size, expected = 0, len(text), -1

    def copy(start_text: int, start_ref: int, length: int) -> None:
        if start_text > literal:
            ops.extend(_literals(text[literal:start_text]))
        if ops and isinstance(ops[-1], list) and ops[-1][0] + ops[-1][1] == start_ref:
            ops[-1][1] += length  # continues the last copy
        else:
            ops.append([start_ref, length])

    if len(source) >= MIN_COPY:
        index = ref.index
        while i <= size - GRAM:
            # The next copy most often goes on where the last one ended (tried when its first MIN_COPY characters
            # match: a shorter run is no copy, and most positions of new text share none).
            if expected >= 0 and text[i : i + MIN_COPY] == source[expected : expected + MIN_COPY]:
                length = _common(text, i, source, expected)
                if length >= MIN_COPY:
                    copy(i, expected, length)
                    i += length
                    literal, expected = i, expected + length
                    continue
            position = index.get(text[i : i + GRAM])
            if position is None:
                i += 1
                continue
            back = 0
            while i - back > literal and position - back > 0 and text[i - back - 1] == source[position - back - 1]:
                back += 1
            length = back + GRAM + _common(text, i + GRAM, source, position + GRAM)
            if length < MIN_COPY:
                i += 1
                continue
            copy(i - back, position - back, length)
            i = i - back + length
            literal, expected = i, position - back + length
    if literal < size:
        ops.extend(_literals(text[literal:]))
    return ops


def _literals(text: str) -> list[str]:
    return [text[start : start + MAX_LITERAL] for start in range(0, len(text), MAX_LITERAL)]


def delta_decode(ops: list, reference: str) -> str:
    """Return the text `ops` rebuild from `reference`."""
    return "".join(op if isinstance(op, str) else reference[op[0] : op[0] + op[1]] for op in ops)


def delta_problem(ops: Any, reference_size: int) -> str:
    """Return what is wrong with `ops` against a reference of `reference_size` characters ("" when nothing)."""
    if not isinstance(ops, list):
        return "must be a list of strings and [start, length] copies"
    for index, op in enumerate(ops):
        if isinstance(op, str):
            continue
        if (
            not isinstance(op, list)
            or len(op) != 2
            or not all(isinstance(n, int) and not isinstance(n, bool) for n in op)
            or op[0] < 0
            or op[1] < 1
            or op[0] + op[1] > reference_size
        ):
            return f"[{index}] must be a string or a [start, length] copy within the {reference_size:,} characters before it"
    return ""


def prompt_reference(system: str, user: str) -> str:
    """The text a snapshot's delta copies from: the earlier snapshot's system message, NUL, its user message."""
    return f"{system}{SEPARATOR}{user}"


def prompt_delta(system: str, user: str, previous: tuple[str, str] | None, *, extra: str = "") -> dict | None:
    """Return the snapshot's delta of (system, user) against the earlier prompts (None: the first).

    The user message copies from the earlier prompt (and `extra`: the save file adds the
    turns' own texts, which it holds anyway); the system message from those and from this
    user message too (a memory block placed in the system prompt quotes the chat's last turns).
    """
    if previous is None:
        return None
    earlier = _earlier(previous, extra)
    user_ops = delta_encode(user, Reference(earlier))
    return {"system": delta_encode(system, Reference(f"{earlier}{SEPARATOR}{user}")), "user": user_ops}


def _earlier(previous: tuple[str, str] | None, extra: str) -> str:
    reference = prompt_reference(*(previous or ("", "")))
    return f"{reference}{SEPARATOR}{extra}" if extra else reference


def prompt_from(row: dict | NarratorSnapshot, previous: tuple[str, str] | None, *, extra: str = "") -> tuple[str, str]:
    """Return a stored snapshot's whole (system, user), given the earlier snapshot's whole prompts."""
    get = row.get if isinstance(row, dict) else lambda name: getattr(row, name)
    delta = get("prompt_delta")
    if not delta:
        return get("system_prompt"), get("user_prompt")
    earlier = _earlier(previous, extra)
    user = delta_decode(delta["user"], earlier)
    return delta_decode(delta["system"], f"{earlier}{SEPARATOR}{user}"), user


def prompt_delta_problem(delta: dict, previous: tuple[str, str], *, extra: str = "") -> str:
    """Return what is wrong with a delta against the earlier prompts ("" when it rebuilds)."""
    earlier = _earlier(previous, extra)
    problem = delta_problem(delta.get("user"), len(earlier))
    if problem:
        return f"user {problem}"
    user = delta_decode(delta["user"], earlier)
    problem = delta_problem(delta.get("system"), len(earlier) + 1 + len(user))
    return f"system {problem}" if problem else ""


# -- reading and writing -----------------------------------------------------------------------

_cache: OrderedDict[int, tuple[str, str]] = OrderedDict()
_cache_lock = threading.Lock()


def _remember(pk: int, prompts: tuple[str, str]) -> None:
    with _cache_lock:
        _cache[pk] = prompts
        _cache.move_to_end(pk)
        while len(_cache) > CACHE_SIZE:
            _cache.popitem(last=False)


def _cached(pk: int) -> tuple[str, str] | None:
    with _cache_lock:
        return _cache.get(pk)


def snapshot_prompts(*, game_save, up_to: int | None = None, since: int | None = None) -> dict[int, tuple[str, str]]:
    """Return {turn: (system, user)}: the whole prompt of each snapshot of the save (up to turn `up_to`).

    `since`: start at that turn, which must hold a snapshot stored whole (`chain_start`).
    """
    rows = NarratorSnapshot.objects.filter(game_save_id=getattr(game_save, "pk", game_save))
    if up_to is not None:
        rows = rows.filter(turn_id__lte=up_to)
    if since is not None:
        rows = rows.filter(turn_id__gte=since)
    out: dict[int, tuple[str, str]] = {}
    previous = None
    for row in rows.order_by("turn_id").values("turn_id", "system_prompt", "user_prompt", "prompt_delta").iterator():
        previous = out[row["turn_id"]] = prompt_from(row, previous)
    return out


def snapshot_prompt(snapshot: NarratorSnapshot) -> tuple[str, str]:
    """Return one snapshot's whole (system, user): cached, stored whole, or rebuilt from the ones before it."""
    if not snapshot.prompt_delta:
        return snapshot.system_prompt, snapshot.user_prompt
    cached = _cached(snapshot.pk)
    if cached is None:
        since = chain_start(game_save_id=snapshot.game_save_id, turn_id=snapshot.turn_id)
        cached = snapshot_prompts(game_save=snapshot.game_save_id, up_to=snapshot.turn_id, since=since)[
            snapshot.turn_id
        ]
        _remember(snapshot.pk, cached)
    return cached


def chain_start(*, game_save_id: int, turn_id: int) -> int | None:
    """Return the turn of the nearest snapshot at or before `turn_id` stored whole (None: none is)."""
    return (
        NarratorSnapshot.objects.filter(game_save_id=game_save_id, turn_id__lte=turn_id, prompt_delta__isnull=True)
        .order_by("-turn_id")
        .values_list("turn_id", flat=True)
        .first()
    )


def previous_prompt(*, game_save_id: int, turn_id: int) -> tuple[str, str] | None:
    """Return the whole prompt of the save's nearest snapshot before `turn_id`, or None (one query when cached)."""
    previous = (
        NarratorSnapshot.objects.filter(game_save_id=game_save_id, turn_id__lt=turn_id)
        .order_by("-turn_id")
        .only("pk", "turn_id", "game_save_id", "system_prompt", "user_prompt", "prompt_delta")
        .first()
    )
    return None if previous is None else snapshot_prompt(previous)


def snapshot_create(
    *, game_save_id: int, turn_id: int, system_prompt: str, user_prompt: str, **fields
) -> NarratorSnapshot:
    """Write the turn's snapshot with its prompt as a delta of the nearest earlier one (`prompt_chars` the whole).

    Run in the caller's transaction (`narrator_accept`'s), under the save's lock, as before.
    """
    previous = previous_prompt(game_save_id=game_save_id, turn_id=turn_id)
    start = chain_start(game_save_id=game_save_id, turn_id=turn_id - 1) if previous is not None else None
    keyframe = previous is None or start is None or turn_id - start >= KEYFRAME_EVERY
    delta = None if keyframe else prompt_delta(system_prompt, user_prompt, previous)
    snapshot = NarratorSnapshot.objects.create(
        game_save_id=game_save_id,
        turn_id=turn_id,
        prompt_chars=len(system_prompt) + len(user_prompt),
        system_prompt="" if delta else system_prompt,
        user_prompt="" if delta else user_prompt,
        prompt_delta=delta,
        **fields,
    )
    if delta:
        _remember(snapshot.pk, (system_prompt, user_prompt))
    return snapshot


def snapshot_choose(
    *, game_save, turn_id: int, alternative, alternatives: int, by_hand: bool = False
) -> NarratorSnapshot | None:
    """Make turn `turn_id`'s snapshot describe `alternative`, the turn's text now (a swipe of the last turn).

    What the narrator read for that alternative (its prompt, as a delta of the previous snapshot,
    and its memory context), what it answered and how (model, finish, latency, tokens, play
    settings); the context's queries replace the first alternative's among the recorded
    queries, as the accept recorded them. `by_hand`: the alternative is the turn's own edited
    text (kept as one by an earlier swipe): the snapshot keeps what the narrator read and says
    the text was the playtester's. Run under the save's lock (`play.last_turn_swipe`'s).
    """
    from studio.memory.models import RecordedQuery
    from studio.memory.recall.search import record_context_queries

    snapshot = NarratorSnapshot.objects.filter(game_save_id=game_save.pk, turn_id=turn_id).first()
    if snapshot is None:
        return None
    fields: dict[str, Any] = {"alternatives": alternatives, "edited": by_hand}
    if not by_hand:
        fields.update(
            proposed=alternative.text,
            model=alternative.model,
            finish_reason=alternative.finish_reason,
            latency_ms=alternative.latency_ms,
            prompt_tokens=alternative.prompt_tokens,
            completion_tokens=alternative.completion_tokens,
        )
        if alternative.play_settings:
            fields["play_settings"] = alternative.play_settings
        if alternative.system_prompt or alternative.user_prompt:  # the memory proxy keeps one prompt: the snapshot's
            prompts = (alternative.system_prompt, alternative.user_prompt)
            delta = prompt_delta(*prompts, previous_prompt(game_save_id=game_save.pk, turn_id=turn_id))
            fields.update(
                prompt_delta=delta,
                prompt_chars=len(prompts[0]) + len(prompts[1]),
                system_prompt="" if delta else prompts[0],
                user_prompt="" if delta else prompts[1],
            )
            _remember(snapshot.pk, prompts)
        if alternative.context and alternative.context != snapshot.context:
            old = (snapshot.context or {}).get("queries") or []
            recorded = RecordedQuery.objects.filter(
                game_save_id=game_save.pk, turn_id=turn_id - 1, params__source="narrator"
            )
            for query in old:  # the rows the accept wrote from the first alternative's context
                row = next(
                    (
                        r
                        for r in recorded
                        if isinstance(query, dict)
                        and r.query_text == query.get("query_text")
                        and r.result_ids == query.get("result_ids")
                        and r.params == {**(query.get("params") or {}), "source": "narrator"}
                    ),
                    None,
                )
                if row is not None:
                    row.delete()
            record_context_queries(
                game_save=game_save, queries=alternative.context.get("queries"), source="narrator", turn_id=turn_id - 1
            )
            fields["context"] = alternative.context
    NarratorSnapshot.objects.filter(pk=snapshot.pk).update(**fields)
    snapshot.refresh_from_db()
    return snapshot


# -- the memory context in a version-1 save file ----------------------------------------------------
# Files written since use version 2 (`saves/portable/recorded.py`); these are still read.

SAME = "$s"
DELTA = "$d"
VERBATIM = "$v"
EQUAL = "$e"  # a list item equal to item N of the previous snapshot's list
AT = "$at"  # a list item written against item N of the previous list ...
VALUE = "$value"  # ... as this


def context_decode(value: Any, previous: Any, reference: str) -> Any:
    """Return the context a version-1 file wrote (each value against the previous snapshot's at the same
    place; a list item against the previous one of the same ref); raise ValueError for markers that do not fit."""
    if isinstance(value, dict):
        if set(value) == {SAME}:
            if previous is None:
                raise ValueError("refers to the previous snapshot's value, which does not exist")
            return previous
        if set(value) == {VERBATIM}:
            return value[VERBATIM]
        if set(value) in ({EQUAL}, {AT, VALUE}):
            at = value.get(EQUAL, value.get(AT))
            if (
                not isinstance(previous, list)
                or not isinstance(at, int)
                or isinstance(at, bool)
                or not 0 <= at < len(previous)
            ):
                raise ValueError(f"refers to item {at!r} of the previous snapshot's list, which does not exist")
            return previous[at] if EQUAL in value else context_decode(value[VALUE], previous[at], reference)
        if set(value) == {DELTA}:
            problem = delta_problem(value[DELTA], len(reference))
            if problem:
                raise ValueError(f"a delta {problem}")
            return delta_decode(value[DELTA], reference)
        before = previous if isinstance(previous, dict) else {}
        return {key: context_decode(item, before.get(key), reference) for key, item in value.items()}
    if isinstance(value, list):
        before = previous if isinstance(previous, list) else []
        return [
            context_decode(item, before, reference)
            if isinstance(item, dict) and set(item) in ({EQUAL}, {AT, VALUE})
            else context_decode(item, before[index] if index < len(before) else None, reference)
            for index, item in enumerate(value)
        ]
    return value

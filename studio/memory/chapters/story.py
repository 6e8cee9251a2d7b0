"""The story-so-far layer of the memory context: summaries, then the open chapter's turns.

`story_items` returns the candidates `build_memory_context` offers the budget before the
rest of memory:

- `summary` items (share `context_share_summary`): the fewest closed rows that cover the
  story before the open chapter, oldest first, an arc rather than its chapters
  (`top_summaries`); each says which turns it covers, its story time, why it closed, and
  whether a playtester edited it. A row with no summary (no model, failed, pending) is a
  cut item that says so: nothing is invented for it.
- `chapter` items (share `context_share_chapter`): the recent turns, in order, each whole (the
  action and the narrative) with its story time: the open chapter's turns, and at least the
  last `min_recent` turns (a chapter just opened still reads as a story). The window starts
  at a turn 1 + k * `window_step` (the earliest that fits the share), so from
  one turn to the next the prompt keeps the same beginning (a model server's prefix cache
  reuses it) until the window moves; turns of the open chapter before the window are cut
  items ("before the window") and stay reachable by the narrative search. The last turn
  always shows: if it alone is longer than the share, its end is shown with the cut marked.
  A turn is dated ("Turn 12 (day 3, dusk)") when its story time differs from the turn before
  it, and the window's first turn always is. Every chapter that begins inside the window is
  marked on its first turn (`why["begins_chapter"]`), so the marks do not move.
  With `reach_back` (the cache-first layout, `context_cap_recall`) the window is not held to
  the open chapter: it shows earlier chapters' turns while its share holds them, and the
  summaries tell only what it does not show. With `max_turns` (`context_recent_turns`) it
  shows at most that many turns (its start still on a step, so between `max_turns - step + 1`
  and `max_turns`); when a save already holds more and they fit in less than the share (short
  turns: a chat of one-line messages), what the share leaves is `spare`, for recall.

`shown_turns` is what the prompt shows in full: the narrative search leaves those turns out
(an item is in the prompt once). The window's knobs (`window_step`, `min_recent`,
`max_lookback`) are the `ContextPolicy`'s (`studio.memory.recall.policy`); the items' budget
policy is their layer's (`studio.memory.recall.layout`: summaries newest first, never refilled).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from studio.memory.chapters.selectors import open_chapter_start, top_summaries
from studio.memory.chapters.story_time import story_time_of
from studio.memory.embeddings.tokens import count_tokens
from studio.memory.recall.policy import DEFAULT_POLICY
from studio.memory.turn_rows import turns_q


@dataclass
class Story:
    summaries: list = field(default_factory=list)  # ContextItem, layer "story"
    turns: list = field(default_factory=list)  # ContextItem, layer "chapter"
    shown_turns: list[int] = field(default_factory=list)
    chapter_start: int = 1
    # The recent turns' share the window leaves because it already shows its most turns (`max_turns`) and they
    # are short: what the allocator adds to the cap on what changes with each action (recall may use it).
    spare: int = 0


def turn_texts(game_save, turn_ids) -> dict[int, str]:
    """Return {turn id: narrative} of those turns (one query)."""
    from studio.world.models import Event

    return dict(Event.objects.filter(turns_q(turn_ids), game_save_id=game_save.pk).values_list("turn_id", "narrative"))


def acting_turns(game_save, *, horizon: int, among=None) -> set[int]:
    """Return the turns up to `horizon` the player acted in: those with a player input (one query).

    `among`: only those of these turns (a context reads the turns it shows, not the whole save).
    """
    from studio.world.models import Event

    rows = Event.objects.filter(game_save_id=game_save.pk, turn_id__lte=horizon).exclude(player_input="")
    if among is not None:
        rows = rows.filter(turns_q(among))
    return set(rows.values_list("turn_id", flat=True))


def _turn_text(turn_id: int, player_input: str, narrative: str, when: str) -> str:
    head = f"Turn {turn_id}" + (f" ({when})" if when else "")
    action = f"> {player_input.strip()}\n" if player_input.strip() else ""
    return f"{head}\n{action}{narrative.strip()}"


def _tail(text: str, tokens: int) -> str:
    """Return the end of `text` within about `tokens` tokens, starting at a sentence, the cut marked."""
    words = text.split()
    kept: list[str] = []
    for word in reversed(words):
        if count_tokens(" ".join([word, *kept])) > max(tokens - 8, 1):
            break
        kept.insert(0, word)
    body = " ".join(kept)
    for mark in (". ", "! ", "? "):
        index = body.find(mark)
        if 0 <= index < len(body) // 2:
            body = body[index + 2 :]
            break
    return "[… the start of this turn is cut …] " + body


def _summary_items(game_save, *, before_turn: int, make_item, fill) -> list:
    """The `summary` items of the closed rows that tell the story before `before_turn` (`top_summaries`)."""
    items = []
    for row in top_summaries(game_save, before_turn=before_turn):
        kind = "arc" if row.level else "chapter"
        when = f", {row.story_time}" if row.story_time else ""
        covers = f"turns {row.first_turn}-{row.last_turn}"
        why = {
            "chapter_id": row.pk,
            "level": row.level,
            "first_turn": row.first_turn,
            "last_turn": row.last_turn,
            "edited": row.edited,
            "close_reason": row.close_reason,
            "story_time": row.story_time,
            "covers": covers,
        }
        if row.has_summary:
            item = make_item(
                layer="story",
                text=f"({covers}{when}) {fill(row.summary.strip())}",
                reason=f"{kind} summary of {covers}{when} (closed: {row.get_close_reason_display().lower()}"
                + ("; edited by a playtester" if row.edited else "")
                + ")",
                why=why,
                ref={"chapter_id": row.pk, "first_turn": row.first_turn, "last_turn": row.last_turn},
                rank=-row.first_turn,
            )  # offered newest first: the share keeps the nearest past
        else:
            item = make_item(
                layer="story",
                text="",
                reason=f"{kind} of {covers}: {row.get_summary_status_display().lower()}",
                why=why,
                ref={"chapter_id": row.pk, "first_turn": row.first_turn, "last_turn": row.last_turn},
                rank=-row.first_turn,
            )
            item.included, item.cut = False, f"no summary: {row.get_summary_status_display().lower()}"
            why["no_summary"] = True
        items.append(item)
    return items


def _spans_from(game_save, turn: int) -> list[tuple[int, int]]:
    """(first, last) turns of the closed chapters that end at or after `turn` (one query): those that begin inside
    the window starting after it, and the one holding it."""
    from studio.memory.chapters.models import Chapter

    return list(
        Chapter.objects.filter(game_save_id=game_save.pk, level=0, last_turn__gte=turn).values_list(
            "first_turn", "last_turn"
        )
    )


def _told_before(spans: list[tuple[int, int]], *, window_start: int, chapter_start: int) -> int:
    """With `reach_back`: the turn the summaries stop before. The closed chapter holding the turn just before the
    window is summarised whole (part of it is out of sight); the chapters the window shows whole are not."""
    if window_start >= chapter_start:
        return chapter_start
    last = next((last for first, last in spans if first <= window_start - 1 <= last), None)
    return min(chapter_start, (last + 1) if last else window_start)


def story_items(
    game_save,
    *,
    horizon: int,
    token_budget: int,
    shares: dict[str, int],
    make_item,
    fill,
    reach_back: bool = False,
    window_step: int = DEFAULT_POLICY.window_step,
    min_recent: int = DEFAULT_POLICY.min_recent,
    max_lookback: int = DEFAULT_POLICY.max_lookback,
    max_turns: int | None = None,
) -> Story:
    """Return the story-so-far candidates for the save's next turn (see the module docstring).

    `make_item(layer=, text=, reason=, why=, ref=, **policy changes)` makes an item (`ContextItem.of`).
    `reach_back`: the window is not held to the open chapter (and its last `min_recent` turns):
    it shows the turns before it too while its share holds them, and the summaries then tell
    only what it does not show (`_told_before`). The layout for prefix caches (a cap on what
    changes with each action, `ContextPolicy.cap_recall`) asks for it: the budget recall
    may not use goes to a longer window, which the next turn's prompt starts with.
    """
    from studio.world.models import Event, StateCache

    story = Story()
    start = open_chapter_start(game_save)
    story.chapter_start = start

    def summaries(before_turn: int) -> Story:
        story.summaries = _summary_items(game_save, before_turn=before_turn, make_item=make_item, fill=fill)
        return story

    if horizon < 1:
        return summaries(min(start, horizon + 1))
    lookback = max(1, horizon - max_lookback + 1)
    events = list(
        Event.objects.filter(game_save_id=game_save.pk, turn_id__gte=lookback, turn_id__lte=horizon)
        .order_by("turn_id")
        .values_list("turn_id", "player_input", "narrative")
    )
    states = dict(
        StateCache.objects.filter(game_save_id=game_save.pk, turn_id__gte=lookback, turn_id__lte=horizon).values_list(
            "turn_id", "state"
        )
    )
    # A turn is dated when its story time differs from the turn before it (a session of LoCoMo's
    # shape shares one date over dozens of turns); the window's first turn is always dated.
    dated: dict[int, str] = {}
    texts, previous = [], None
    for turn_id, player_input, narrative in events:
        when = story_time_of(states.get(turn_id))
        dated[turn_id] = fill(_turn_text(turn_id, player_input, narrative, when))
        texts.append(
            (turn_id, dated[turn_id] if when != previous else fill(_turn_text(turn_id, player_input, narrative, "")))
        )
        previous = when
    if not texts:
        return summaries(min(start, horizon + 1))
    cap = token_budget * shares.get("chapter", 100) // 100
    sizes = {turn_id: count_tokens(text) for turn_id, text in texts}
    dated_sizes = {turn_id: count_tokens(dated[turn_id]) for turn_id, text in texts if text != dated[turn_id]}
    # The open chapter's turns, and at least the last `min_recent` turns (a chapter just opened
    # still reads as a story): earlier chapters are told by their summaries.
    floor = lookback if reach_back else min(start, max(horizon - min_recent + 1, 1))
    floor = ((floor - 1) // window_step) * window_step + 1  # anchored, so it moves a step at a time
    window_start = window_start_for(
        {t: n for t, n in sizes.items() if t >= floor},
        horizon=horizon,
        cap=cap,
        first_sizes=dated_sizes,
        step=window_step,
    )
    if max_turns and horizon - window_start + 1 > max_turns:  # the share holds more turns than the window shows
        # The first step inside the bound (the last turn at least, for a bound shorter than a step).
        window_start = min(-(-(horizon - max_turns) // window_step) * window_step + 1, horizon)
        shown = sum(size for turn_id, size in sizes.items() if turn_id > window_start)
        story.spare = max(cap - shown - dated_sizes.get(window_start, sizes.get(window_start, 0)), 0)
    spans = _spans_from(game_save, window_start - 1)
    summaries(
        _told_before(spans, window_start=window_start, chapter_start=start) if reach_back else min(start, horizon + 1)
    )
    # Every chapter that begins inside the window is marked on its first turn, not only the open one: a mark
    # that moved when the next chapter opened would change the prompt's middle (and a prefix cache's reuse).
    begins = {first for first, _last in spans if window_start <= first <= horizon} | {start}
    for turn_id, text in texts:
        if turn_id == window_start:
            text = dated[turn_id]
        if turn_id < min(start, window_start):
            continue  # an earlier chapter's turn the window does not reach: its summary tells it
        why = {
            "turn_id": turn_id,
            "chapter_start": start,
            "window_start": window_start,
            "before_chapter": turn_id < start,
            "begins_chapter": turn_id in begins and turn_id != 1,
        }
        ref = {"turn_id": turn_id}
        if turn_id < window_start:
            item = make_item(layer="chapter", text=text, reason=f"turn {turn_id} of the open chapter", why=why, ref=ref)
            item.included = False
            item.cut = (
                f"before the window: turns {window_start}-{horizon} fill the share of the recent turns "
                f"({shares.get('chapter', 100)}% = {cap} tokens); the window moves {window_step} turns at a time"
            )
            why["outside_window"] = True
        else:
            if turn_id == horizon and sizes[turn_id] > cap:
                text = _tail(text, cap)
                why["cut_marked"] = True
            where = "of the open chapter" if turn_id >= start else f"before the open chapter (it began at turn {start})"
            item = make_item(
                layer="chapter", text=text, reason=f"turn {turn_id}, {where}: a recent turn, in full", why=why, ref=ref
            )
            story.shown_turns.append(turn_id)
        story.turns.append(item)
    return story


def window_start_for(
    sizes: dict[int, int],
    *,
    horizon: int,
    cap: int,
    first_sizes: dict[int, int] | None = None,
    step: int = DEFAULT_POLICY.window_step,
) -> int:
    """Return the first turn shown in full: the earliest turn 1 + k * `step` whose window fits `cap`.

    Anchored on fixed turn numbers, so the window's start stays put while turns are appended
    and moves by `step` turns when it must (the last turn is always shown). `first_sizes`:
    a turn's size when it opens the window (dated in full), where that differs.
    """
    first_sizes = first_sizes or {}
    anchor = ((min(sizes) - 1) // step) * step + 1
    while anchor <= horizon:
        first = max(anchor, min(sizes))
        total = sum(size for turn_id, size in sizes.items() if turn_id > first) + first_sizes.get(
            first, sizes.get(first, 0)
        )
        if total <= cap:
            return first
        anchor += step
    return horizon

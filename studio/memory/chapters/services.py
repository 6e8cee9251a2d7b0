"""Writes of chapters: close one, roll chapters up into arcs, the playtester's summary edit.

A chapter closes three ways, each through `_close` (the one writer):
- the playtester closes the open chapter (`chapter_close`: console and API);
- a scene change: `chapter_after_turn`, called inside `turn_append`'s transaction, closes
  the open chapter *before* a turn whose state's `location` differs from the previous
  turn's (that turn opens the next chapter);
- a length limit: the same call closes the open chapter *at* its `chapter_turns`-th turn.
Closing writes the row (its turns, why it closed, the story time of its first and last turn)
and queues its summary job on commit; without a configured model no job is queued and the
chapter says no summary was made (`SummaryStatus.NO_MODEL`). Then every `chapters_per_arc`
consecutive rows of one level not yet inside an arc roll up into an arc one level up,
summarised from their summaries once they all have one.

Everything runs in the caller's transaction under the save's row lock (`turn_append`'s, or
the one `chapter_close` takes), so two closes never interleave; jobs are created in it and
woken on commit (`ledger.job_create`).
"""

from __future__ import annotations

from django.conf import settings
from django.db import transaction

from studio import limits
from studio.memory.chapters.models import Chapter, ChapterCloseReason, SummaryStatus
from studio.memory.chapters.selectors import SCENE_KEYS, chapter_settings, open_chapter_start
from studio.memory.chapters.story_time import story_time_of
from studio.memory.jobs import ledger
from studio.memory.models import JobKind
from studio.memory.turn_rows import turns_q


class ChapterError(ValueError):
    """A chapter operation that cannot be done (an empty open chapter, a summary too long)."""


def _locked_chapter(chapter: Chapter) -> Chapter:
    """Return the chapter's row locked (under the save's lock, taken first); ChapterError when a rewind removed it."""
    row = Chapter.objects.select_for_update().filter(pk=chapter.pk).first()
    if row is None:
        raise ChapterError("This chapter is gone: the save was rewound (or undone) before it. Reload the chapters.")
    return row


def _checked(field: limits.Limit, value: str) -> str:
    problem = field.problem(value)
    if problem:
        raise ChapterError(f"The {field.label} {problem}")
    return value


def _states(game_save, turn_ids) -> dict[int, dict]:
    from studio.world.models import StateCache

    return dict(StateCache.objects.filter(turns_q(turn_ids), game_save_id=game_save.pk).values_list("turn_id", "state"))


def _model_configured() -> bool:
    return bool(getattr(settings, "AXIOM_LLM_BASE_URL", ""))


def enqueue_summary(*, chapter: Chapter, game_save) -> None:
    """Queue the summary job of `chapter` (its turn is the chapter's last: a rewind before it drops the job)."""
    ledger.job_create(
        kind=JobKind.SUMMARIZE_CHAPTER,
        universe_id=game_save.universe_id,
        game_save_id=game_save.pk,
        turn_id=chapter.last_turn,
        timeline_generation=game_save.timeline_generation,
        progress=f"summarize {chapter.kind_label} (turns {chapter.first_turn}-{chapter.last_turn})",
        payload={"chapter": chapter.pk},
    )


def summaries_requeue(*, game_save, chapters) -> None:
    """Queue summary jobs for `chapters` of `game_save` whose summary is pending (a fork's copies
    of rows whose summary the source had not made yet at the fork's turn).

    A chapter gets its job; an arc gets one once none of its children waits (`maybe_summarize_arc`,
    then queued by the last child's summary). Without a configured model they are marked so, as
    a chapter closed without one is.
    """
    rows = [row for row in chapters if row.summary_status == SummaryStatus.PENDING and not row.edited]
    if not _model_configured():
        Chapter.objects.filter(pk__in=[row.pk for row in rows]).update(summary_status=SummaryStatus.NO_MODEL)
        return
    for row in rows:
        if row.level == 0:
            enqueue_summary(chapter=row, game_save=game_save)
        else:
            maybe_summarize_arc(arc=row, game_save=game_save)


def _close(
    game_save,
    *,
    first: int,
    last: int,
    level: int,
    reason: str,
    note: str,
    closed: int,
    story_time: tuple[str, str] | None = None,
    summarize: bool = True,
) -> Chapter:
    if story_time is None:
        states = _states(game_save, {first, last})
        story_time = (story_time_of(states.get(first)), story_time_of(states.get(last)))
    chapter = Chapter.objects.create(
        game_save_id=game_save.pk,
        level=level,
        first_turn=first,
        last_turn=last,
        closed_turn=closed,
        close_reason=reason,
        close_note=note[:300],
        story_time_start=story_time[0],
        story_time_end=story_time[1],
        summary_status=SummaryStatus.PENDING if summarize and _model_configured() else SummaryStatus.NO_MODEL,
    )
    if level == 0 and chapter.summary_status == SummaryStatus.PENDING:
        enqueue_summary(chapter=chapter, game_save=game_save)
    return chapter


def _roll_up(game_save, *, chapters_per_arc: int, closed: int, level: int = 0, summarize: bool = True) -> None:
    """Roll every `chapters_per_arc` rows of `level` not yet inside an arc into an arc (recursively)."""
    if chapters_per_arc <= 0:
        return
    covered = (
        Chapter.objects.filter(game_save_id=game_save.pk, level=level + 1)
        .order_by("-last_turn")
        .values_list("last_turn", flat=True)
        .first()
        or 0
    )
    loose = list(
        Chapter.objects.filter(game_save_id=game_save.pk, level=level, first_turn__gt=covered).order_by("first_turn")
    )
    if len(loose) < chapters_per_arc:
        return
    group = loose[:chapters_per_arc]
    arc = _close(
        game_save,
        first=group[0].first_turn,
        last=group[-1].last_turn,
        level=level + 1,
        reason=ChapterCloseReason.ROLLUP,
        closed=closed,
        note=f"{len(group)} {'chapters' if level == 0 else 'arcs'}: turns {group[0].first_turn}-{group[-1].last_turn}",
        story_time=(group[0].story_time_start, group[-1].story_time_end),
        summarize=summarize,
    )
    maybe_summarize_arc(arc=arc, game_save=game_save)
    _roll_up(game_save, chapters_per_arc=chapters_per_arc, closed=closed, level=level + 1, summarize=summarize)


def children_of(arc: Chapter) -> list[Chapter]:
    """Return the rows one level down that an arc covers, in turn order."""
    return list(
        Chapter.objects.filter(
            game_save_id=arc.game_save_id,
            level=arc.level - 1,
            first_turn__gte=arc.first_turn,
            last_turn__lte=arc.last_turn,
        ).order_by("first_turn")
    )


def maybe_summarize_arc(*, arc: Chapter, game_save) -> None:
    """Queue an arc's summary once none of its children waits for one (an arc is told from their summaries)."""
    if arc.level == 0 or arc.summary_status != SummaryStatus.PENDING or arc.edited:
        return
    if any(child.summary_status == SummaryStatus.PENDING and not child.edited for child in children_of(arc)):
        return
    enqueue_summary(chapter=arc, game_save=game_save)


def parent_arc(chapter: Chapter) -> Chapter | None:
    return Chapter.objects.filter(
        game_save_id=chapter.game_save_id,
        level=chapter.level + 1,
        first_turn__lte=chapter.first_turn,
        last_turn__gte=chapter.last_turn,
    ).first()


def chapter_after_turn(
    *, game_save, turn_id: int, state: dict | None, universe_meta: dict[str, str] | None = None, summarize: bool = True
) -> Chapter | None:
    """Close the open chapter if turn `turn_id` (just appended) ends it; return the closed chapter.

    Call inside the append's transaction, with the save's row locked. `summarize=False` queues no
    summary (the rows say no model made one): the demo's loader, whose summaries are recorded.
    """
    config = chapter_settings(
        universe_meta=universe_meta if universe_meta is not None else game_save.universe.meta_values()
    )
    first = open_chapter_start(game_save)
    closed = None
    if config.on_scene_change and turn_id - first >= max(config.min_turns, 1):
        previous = _states(game_save, {turn_id - 1}).get(turn_id - 1) or {}
        for key in SCENE_KEYS:
            before, now = previous.get(key) if isinstance(previous, dict) else None, (state or {}).get(key)
            if before and now and str(before).strip() != str(now).strip():
                closed = _close(
                    game_save,
                    first=first,
                    last=turn_id - 1,
                    level=0,
                    reason=ChapterCloseReason.SCENE,
                    note=f"{key}: {before} → {now}",
                    closed=turn_id,
                    summarize=summarize,
                )
                first = turn_id
                break
    if config.turns_per_chapter and turn_id - first + 1 >= config.turns_per_chapter:
        closed = _close(
            game_save,
            first=first,
            last=turn_id,
            level=0,
            reason=ChapterCloseReason.LENGTH,
            note=f"{turn_id - first + 1} turns (chapter_turns = {config.turns_per_chapter})",
            closed=turn_id,
            summarize=summarize,
        )
    if closed is not None:
        _roll_up(game_save, chapters_per_arc=config.chapters_per_arc, closed=turn_id, summarize=summarize)
    return closed


def chapters_close_at(
    *,
    game_save,
    last_turn: int,
    reason: str = ChapterCloseReason.PLAYTESTER,
    note: str = "",
    story_time: str | None = None,
    expected_turn: int | None = None,
) -> Chapter | None:
    """Close the open chapter at `last_turn` (<= the current turn); return it, or None when it would be empty.

    `expected_turn`: the save's current turn as the caller's page showed it; when the save has
    moved since (a turn appended or undone elsewhere), nothing is closed (ChapterError).
    """
    from studio.world.models import Save

    _checked(limits.CHAPTER_NOTE, note)
    with transaction.atomic():
        locked = Save.objects.select_for_update().select_related("universe").get(pk=game_save.pk)
        if expected_turn is not None and expected_turn != locked.current_turn:
            raise ChapterError(
                f"The save is at turn {locked.current_turn} now, not turn {expected_turn} as this page "
                "showed: no chapter was closed. Read the latest turns, then close it again."
            )
        if last_turn > locked.current_turn:
            raise ChapterError(f"turn {last_turn} is after the save's current turn ({locked.current_turn})")
        first = open_chapter_start(locked)
        if last_turn < first:
            return None
        times = (story_time, story_time) if story_time is not None else None
        chapter = _close(
            locked,
            first=first,
            last=last_turn,
            level=0,
            reason=reason,
            note=note,
            story_time=times,
            closed=locked.current_turn,
        )
        _roll_up(
            locked,
            chapters_per_arc=chapter_settings(universe_meta=locked.universe.meta_values()).chapters_per_arc,
            closed=locked.current_turn,
        )
    return chapter


def chapter_close(*, game_save, note: str = "", expected_turn: int | None = None) -> Chapter:
    """Close the open chapter at the save's current turn (the playtester's action); raise ChapterError if it is empty.

    With `expected_turn` (the console's button says which turn it closes at), the chapter is
    closed at that turn only if the save still stands there.
    """
    last_turn = game_save.current_turn if expected_turn is None else expected_turn
    chapter = chapters_close_at(
        game_save=game_save, last_turn=last_turn, note=note or "closed by the playtester", expected_turn=expected_turn
    )
    if chapter is None:
        raise ChapterError("The open chapter has no turns yet: play a turn before closing it.")
    return chapter


def chapter_summary_edit(*, chapter: Chapter, text: str) -> Chapter:
    """Set the playtester's summary (an override, marked edited, never regenerated over).

    An empty `text` removes the override: the model's summary comes back if there was one,
    else a new summary job is queued (or, without a model, it says none was made).
    """
    from studio.world.models import Save

    text = _checked(limits.CHAPTER_SUMMARY, (text or "").strip())
    with transaction.atomic():
        locked_save = Save.objects.select_for_update().get(pk=chapter.game_save_id)
        row = _locked_chapter(chapter)
        if text:
            if not row.edited and row.summary_status == SummaryStatus.DONE:
                row.generated_summary = row.summary
            row.summary, row.edited = text, True
        else:
            row.edited = False
            row.summary = row.generated_summary
            if row.generated_summary:
                row.summary_status = SummaryStatus.DONE
            elif _model_configured():
                row.summary_status = SummaryStatus.PENDING
                enqueue_summary(chapter=row, game_save=locked_save)
            else:
                row.summary_status = SummaryStatus.NO_MODEL
        row.save()
        arc = parent_arc(row)
        if arc is not None:
            maybe_summarize_arc(arc=arc, game_save=locked_save)
    return row


def chapter_summarize_again(*, chapter: Chapter) -> Chapter:
    """Queue a new summary of `chapter` (not over a playtester's edit); raise ChapterError if it cannot be."""
    from studio.world.models import Save

    with transaction.atomic():
        locked_save = Save.objects.select_for_update().get(pk=chapter.game_save_id)
        row = _locked_chapter(chapter)
        if row.edited:
            raise ChapterError("This summary was edited by a playtester: clear the edit to have it summarized again.")
        if not _model_configured():
            raise ChapterError("No model is configured (AXIOM_LLM_BASE_URL): no summary can be made.")
        row.summary_status, row.summary_error = SummaryStatus.PENDING, ""
        row.save(update_fields=["summary_status", "summary_error", "updated_at"])
        enqueue_summary(chapter=row, game_save=locked_save)
    return row

"""Reads for saves: only those of universes the user may see, with the rows each page needs.

Every list here is built so a page costs a fixed number of queries whatever its size:
counts are correlated subqueries (one join per count would multiply the rows), and the
rows hung under a page of turns (facts, jobs) are fetched in one query for the whole page.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from dataclasses import dataclass, field

from django.core.paginator import Page, Paginator
from django.db.models import Count, IntegerField, OuterRef, QuerySet, Subquery, Value
from django.db.models.functions import Coalesce
from django.http import Http404

from studio.memory.models import Fact, Job, MentalModel, Observation
from studio.world.models import Event, Save, Universe
from studio.universes.selectors import universe_list_for_user

TIMELINE_TURNS_PER_PAGE = 20
logger = logging.getLogger(__name__)


def save_list_for_user(*, user) -> QuerySet[Save]:
    return Save.objects.filter(universe__in=universe_list_for_user(user=user)).select_related("universe")


def _count_subquery(model, *, manager=None) -> Coalesce:
    rows = (manager or model.objects).filter(game_save=OuterRef("pk")).order_by()
    counted = rows.values("game_save").annotate(n=Count("pk")).values("n")
    return Coalesce(Subquery(counted, output_field=IntegerField()), Value(0))


def save_list_with_counts(*, user, universe: Universe | None = None) -> QuerySet[Save]:
    """Return the saves `user` may see, annotated with their turn, fact, belief and model counts.

    `event_count`, `fact_count`, `belief_count` (live beliefs only) and `model_count` are
    subqueries, so the list is one query however many saves and rows there are.
    """
    qs = save_list_for_user(user=user)
    if universe is not None:
        qs = qs.filter(universe=universe)
    return qs.annotate(
        event_count=_count_subquery(Event),
        fact_count=_count_subquery(Fact),
        belief_count=_count_subquery(Observation, manager=Observation.objects),
        model_count=_count_subquery(MentalModel),
    ).order_by("universe__name", "-last_activity_at", "-id")


@dataclass
class TimelineTurn:
    event: Event
    facts: list[Fact] = field(default_factory=list)
    jobs: list[Job] = field(default_factory=list)
    # The turn's narrative chunks in the vector store (id, part), for "why not this turn?";
    # None when the store could not be read.
    chunks: list[dict] | None = None

    @property
    def turn_id(self) -> int:
        return self.event.turn_id

    @property
    def job_state(self) -> str:
        """One word for the turn's jobs: the worst state among its latest job of each kind."""
        latest: dict[str, Job] = {}
        for job in self.jobs:  # newest first
            latest.setdefault(job.kind, job)
        states = {job.status for job in latest.values()}
        for state in ("failed", "paused", "running", "queued", "skipped", "done"):
            if state in states:
                return state
        return ""


def timeline_page(
    *, game_save: Save, page_number=1, per_page: int = TIMELINE_TURNS_PER_PAGE
) -> tuple[Page, list[TimelineTurn]]:
    """Return one page of the save's turns (newest first) with each turn's facts and jobs.

    Three queries whatever the page holds: the events, the facts of those turns, the jobs of
    those turns (plus the paginator's count).
    """
    events = game_save.events.order_by("-turn_id")
    page = Paginator(events, per_page).get_page(page_number)
    turns = [TimelineTurn(event=e) for e in page.object_list]
    turn_ids = [t.turn_id for t in turns]
    if turn_ids:
        facts_by_turn: dict[int, list[Fact]] = defaultdict(list)
        for fact in Fact.objects.filter(game_save=game_save, turn_id__in=turn_ids).order_by("turn_id", "id"):
            facts_by_turn[fact.turn_id].append(fact)
        jobs_by_turn: dict[int, list[Job]] = defaultdict(list)
        jobs = Job.objects.filter(game_save=game_save, turn_id__in=turn_ids).order_by("-created_at", "-id")
        for job in jobs.only(
            "id", "kind", "status", "turn_id", "error", "progress", "created_at", "timeline_generation"
        ):
            jobs_by_turn[job.turn_id].append(job)
        for turn in turns:
            turn.facts = facts_by_turn.get(turn.turn_id, [])
            turn.jobs = jobs_by_turn.get(turn.turn_id, [])
    return page, turns


def event_get(*, game_save: Save, turn_id: int) -> Event:
    try:
        return game_save.events.get(turn_id=turn_id)
    except Event.DoesNotExist as exc:
        raise Http404("No such turn.") from exc


def recent_events(*, game_save: Save, limit: int = 5) -> list[Event]:
    """Return the save's last `limit` turns, oldest first (the console shows them as a story)."""
    return list(reversed(game_save.events.order_by("-turn_id")[:limit]))


def timeline_turn(*, game_save: Save, turn_id: int) -> TimelineTurn:
    """Return one turn with its facts and jobs (the timeline's row, re-rendered after an edit)."""
    event = event_get(game_save=game_save, turn_id=turn_id)
    return TimelineTurn(
        event=event,
        facts=list(Fact.objects.filter(game_save=game_save, turn_id=turn_id).order_by("id")),
        jobs=list(Job.objects.filter(game_save=game_save, turn_id=turn_id).order_by("-created_at", "-id")),
    )


def attach_turn_chunks(*, game_save: Save, turns: list[TimelineTurn]) -> None:
    """Give each turn the ids of its narrative chunks (one vector-store read for the page).

    A store that cannot be read leaves `chunks` None: the timeline still shows, without ids.
    """
    if not turns:
        return
    try:
        from studio.memory.vector import get_vector_memory

        rows = get_vector_memory().get_chunks(
            game_save.save_id, chunk_type="narrative", turn_ids=[turn.turn_id for turn in turns]
        )
    except Exception:  # the engine missing or failing must not break the timeline
        logger.warning("Reading the timeline's chunk ids failed", exc_info=True)
        return
    by_turn: dict[int, list[dict]] = defaultdict(list)
    for row in rows:
        by_turn[row["turn_id"]].append(
            {
                "id": row["id"],
                "part": int(row["metadata"].get("chunk_part", 0)) + 1,
                "parts": int(row["metadata"].get("chunk_parts", 1)),
            }
        )
    for turn in turns:
        turn.chunks = sorted(by_turn.get(turn.turn_id, []), key=lambda chunk: chunk["part"])


STORY_TURNS = 12  # the Console's story shows the last turns; "Show earlier turns" adds STORY_TURNS_MORE
STORY_TURNS_MORE = 20
STORY_TURNS_MAX = 200


@dataclass
class StoryTurn:
    """One turn as the story view shows it, with the quiet headings that come before it."""

    event: Event
    chapter: int | None = None  # the number of the chapter that starts at this turn
    chapter_open: bool = False  # that chapter is the open one
    story_time: str = ""  # the turn's story time, when it differs from the turn before's


def story_turns(*, game_save: Save, limit: int = STORY_TURNS, open_start: int | None = None) -> list[StoryTurn]:
    """Return the save's last `limit` turns, oldest first, with chapter starts and story times (four queries).

    `open_start`: the open chapter's first turn when the caller has it (`open_chapter`).
    """
    from studio.memory.chapters.models import Chapter
    from studio.memory.chapters.story_time import story_times

    events = list(reversed(game_save.events.order_by("-turn_id")[: max(1, limit)]))
    if not events:
        return []
    first, last = events[0].turn_id, events[-1].turn_id
    chapters = Chapter.objects.filter(game_save_id=game_save.pk, level=0)
    before = chapters.filter(first_turn__lt=first).count()
    starts = list(
        chapters.filter(first_turn__gte=first, first_turn__lte=last)
        .order_by("first_turn")
        .values_list("first_turn", flat=True)
    )
    numbers = {turn: before + index for index, turn in enumerate(starts, start=1)}
    if open_start is None:
        open_start = (chapters.order_by("-last_turn").values_list("last_turn", flat=True).first() or 0) + 1
    if first <= open_start <= last:
        numbers[open_start] = before + len(starts) + 1
    times = story_times(game_save, [first - 1] + [e.turn_id for e in events])
    out, previous = [], times.get(first - 1, "")
    for event in events:
        time = times.get(event.turn_id, "")
        out.append(
            StoryTurn(
                event=event,
                chapter=numbers.get(event.turn_id),
                chapter_open=event.turn_id == open_start,
                story_time=time if time and time != previous else "",
            )
        )
        previous = time or previous
    return out


def turn_llm_calls(*, game_save: Save, turn) -> tuple[list, list]:
    """Return the LLM calls of a turn's jobs: (those of the turn as it is, those of earlier versions of it).

    An Undo, a Retry or a rewind drops a turn and its number is played again: the old version's
    jobs stay in the ledger (on their timeline generation), and their calls are listed apart,
    each with `version` (1 = the first version of the turn number). Two queries.
    """
    from studio.memory.jobs.timeline import EVENT_KEY, job_is_for_event
    from studio.memory.models import LLMCall

    event = {"pk": turn.event.pk, "created_at": turn.event.created_at}
    calls = list(
        LLMCall.objects.filter(job__game_save=game_save, job__turn_id=turn.turn_id)
        .select_related("job")
        .order_by("created_at", "id")
    )
    current = [call for call in calls if job_is_for_event(call.job, event)]
    earlier = [call for call in calls if not job_is_for_event(call.job, event)]
    versions: dict = {}
    for call in earlier:  # each dropped version of the turn: its Event (or, unrecorded, its generation)
        key = (call.job.payload or {}).get(EVENT_KEY) or f"generation {call.job.timeline_generation}"
        call.version = versions.setdefault(key, len(versions) + 1)
    return current, earlier


REWIND_TURNS_SHOWN = 30  # the rewind preview lists at most this many of the turns it removes (newest first)


def turns_removed_by(*, game_save: Save, target_turn: int, limit: int = REWIND_TURNS_SHOWN) -> list[Event]:
    """Return the turns a rewind to `target_turn` removes, newest first, at most `limit` (one query).

    Only the columns the preview shows; its first lines come from the narrative's start.
    """
    return list(
        game_save.events.filter(turn_id__gt=target_turn)
        .order_by("-turn_id")
        .only("turn_id", "player_input", "narrative", "edited_at")[:limit]
    )


@dataclass
class LoreLine:
    """What the Lore Book brought into one turn: the entries that activated, and which came by recursion."""

    turn: int
    entries: list  # universes.lore_tester.TesterRow, in the order they activated, each with `via_title`
    by_recursion: int


def turn_lore_line(*, game_save: Save, turn_id: int | None = None) -> LoreLine | None:
    """Return what activated at turn `turn_id` (default: the last) and why, as the key tester explains it.

    The turn's action with the turns before it, its timed effects and its seed, against the
    Lore Book as it is now (`universes.lore_tester.lore_key_test`); an entry pulled in by another
    entry's text says which (`via_entry`: "recursion from entry Y"). None before turn 1.
    """
    from studio.universes.lore_tester import lore_key_test

    turn_id = turn_id or game_save.current_turn
    event = game_save.events.filter(turn_id=turn_id).only("player_input").first()
    if event is None:
        return None
    result = lore_key_test(universe=game_save.universe, text=event.player_input, save=game_save, turn=turn_id)
    titles = {row.entry_id: row.title for row in result.included + result.considered}
    for row in result.included:  # the entry whose text brought this one in, by its title
        row.via_title = titles.get(row.via_entry, row.via_entry)
    return LoreLine(
        turn=turn_id, entries=result.included, by_recursion=sum(1 for row in result.included if row.via_entry)
    )

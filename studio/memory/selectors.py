"""Reads of a save's living memory: facts, beliefs, mental models and jobs.

The memory inspector pages and the JSON API read through these; nothing here writes.

Invariants
- Each list costs a fixed number of queries whatever it holds: a page of beliefs with
  their trends is the paginator's count and the page; mental models with their first
  source beliefs are two queries; a page of facts, beliefs or models for the API is one.
- The inspector pages read at the save's current turn. The API's reads (`*_at_turn`) take
  a `horizon` the caller has clamped with `studio.memory.recall.search.memory_horizon`, and
  return the engine's records (`studio.memory.facts.Fact`, `observations.Observation`,
  `mental_models.MentalModel`), the shapes the API serializes.
- A belief's trend is computed from the turn ids in its `sources` at a turn (see
  `observations.compute_trend`), so it is not a column: a trend filter reads the
  candidate rows in order, in SQL-filtered form (save, horizon, subject, stale), and stops
  as soon as the page is full.

Failure modes: `belief_get` raises Http404 for a belief of another save; malformed
`sources` entries (not a dict, no integer turn) are skipped, never an error.
"""

from __future__ import annotations

from django.core.paginator import Page, Paginator
from django.db.models import Count, Max, Q, QuerySet
from django.http import Http404

from studio.memory import facts as engine_facts
from studio.memory import mental_models as engine_models
from studio.memory import observations as engine_observations
from studio.memory.jobs.selectors import jobs_active_for_save, jobs_for_save
from studio.memory.models import ENTITY_SEPARATOR, Fact, Job, MentalModel, Observation, subject_key_for
from studio.memory.observations import compute_trend
from studio.world.models import Save

FACTS_PER_PAGE = 50
BELIEFS_PER_PAGE = 50
# Rows read per round trip while a trend filter looks for a page of matches.
TREND_SCAN_CHUNK = 200


# -- facts ---------------------------------------------------------------------------------


def fact_list(
    *,
    game_save: Save,
    turn_from: int | None = None,
    turn_to: int | None = None,
    entity: str = "",
    fact_type: str = "",
    search: str = "",
) -> QuerySet[Fact]:
    """Return the save's facts up to its current turn, most recent first, filtered.

    `entity` is a case-insensitive exact match on a fact's entities (as `get_facts`);
    `search` a case-insensitive substring of the statement.
    """
    qs = Fact.objects.filter(game_save=game_save, turn_id__lte=game_save.current_turn)
    if turn_from is not None:
        qs = qs.filter(turn_id__gte=turn_from)
    if turn_to is not None:
        qs = qs.filter(turn_id__lte=turn_to)
    if entity.strip():
        qs = qs.filter(entity_index__contains=f"{ENTITY_SEPARATOR}{entity.strip().casefold()}{ENTITY_SEPARATOR}")
    if fact_type:
        qs = qs.filter(fact_type=fact_type)
    if search.strip():
        qs = qs.filter(statement__icontains=search.strip())
    return qs.order_by("-turn_id", "-id")


def fact_types(*, game_save: Save) -> list[str]:
    return list(
        Fact.objects.filter(game_save=game_save).order_by("fact_type").values_list("fact_type", flat=True).distinct()
    )


def facts_by_id(*, game_save: Save, fact_ids: list[int]) -> dict[int, Fact]:
    if not fact_ids:
        return {}
    return {f.pk: f for f in Fact.objects.filter(game_save=game_save, pk__in=fact_ids)}


def fact_list_at_turn(
    *, game_save: Save, horizon: int, entity: str | None = None, offset: int = 0, limit: int | None = None
) -> list[engine_facts.Fact]:
    """Return the save's facts of turns <= `horizon`, most recent first, from `offset`.

    `entity` keeps facts naming it (case-insensitive exact match); blank or None: all.
    """
    end = None if limit is None else offset + limit
    return engine_facts.get_facts(game_save, max_turn_id=horizon, entity=entity or None, limit=end)[offset:]


# -- beliefs -------------------------------------------------------------------------------


def source_turns(belief) -> list[int]:
    """Return the turn ids of a belief's sources, skipping malformed entries."""
    turns = []
    for source in belief.sources or []:
        try:
            turns.append(int(source.get("turn_id")))
        except (TypeError, ValueError, AttributeError):
            continue
    return turns


def belief_subjects(*, game_save: Save) -> list[dict]:
    """Return each subject of the save's live beliefs with its belief and stale counts."""
    rows = (
        Observation.objects.filter(game_save=game_save)
        .order_by()
        .values("subject_key")
        .annotate(n=Count("pk"), stale_n=Count("pk", filter=Q(stale=True)), name=Max("subject"))
        .order_by("subject_key")
    )
    return [{"key": r["subject_key"], "name": r["name"] or "", "count": r["n"], "stale": r["stale_n"]} for r in rows]


def belief_list(*, game_save: Save, subject_key: str | None = None, search: str = "") -> QuerySet[Observation]:
    """Return the save's live beliefs grouped by subject, strongest first within a subject."""
    qs = Observation.objects.filter(game_save=game_save)
    if subject_key is not None:
        qs = qs.filter(subject_key=subject_key)
    if search.strip():
        qs = qs.filter(statement__icontains=search.strip())
    return qs.order_by("subject_key", "-proof_count", "-updated_turn_id", "-id")


def belief_page(
    *,
    game_save: Save,
    subject_key: str | None = None,
    search: str = "",
    page_number=1,
    per_page: int = BELIEFS_PER_PAGE,
) -> Page:
    """Return one page of `belief_list`, each belief with `.trend` at the save's current turn."""
    page = Paginator(belief_list(game_save=game_save, subject_key=subject_key, search=search), per_page).get_page(
        page_number
    )
    for belief in page.object_list:
        belief.trend = compute_trend(source_turns(belief), game_save.current_turn)
    return page


def belief_get(*, game_save: Save, observation_id: int) -> Observation:
    """Return one belief of the save, retired ones included (their page still explains them)."""
    try:
        return Observation.all_objects.get(game_save=game_save, pk=observation_id)
    except Observation.DoesNotExist as exc:
        raise Http404("No such belief.") from exc


def belief_sources(*, game_save: Save, belief: Observation) -> list[dict]:
    """Return a belief's sources by turn, each with its fact (None when no longer stored).

    One query for the facts, whatever the number of sources.
    """

    def fact_id(source) -> int | None:
        value = str(source.get("fact_id", "")) if isinstance(source, dict) else ""
        return int(value) if value.isdigit() else None

    sources = [s for s in belief.sources or [] if isinstance(s, dict)]
    facts = facts_by_id(game_save=game_save, fact_ids=[i for i in map(fact_id, sources) if i is not None])
    return [
        {"fact_id": s.get("fact_id"), "turn_id": s.get("turn_id"), "fact": facts.get(fact_id(s))}
        for s in sorted(sources, key=lambda s: (int(s.get("turn_id") or 0), int(s.get("fact_id") or 0)))
    ]


def belief_list_at_turn(
    *,
    game_save: Save,
    horizon: int,
    subject: str | None = None,
    trend: str | None = None,
    stale: bool | None = None,
    offset: int = 0,
    limit: int | None = None,
) -> list[engine_observations.Observation]:
    """Return the save's live beliefs created by turn `horizon`, most recently updated first.

    `subject` keeps one subject (case-insensitive; "" is the world); `stale` keeps beliefs
    with that flag (in SQL); `trend` keeps beliefs whose trend at `horizon` is that one.
    Return at most `limit` beliefs from the `offset`-th match.
    """
    rows = Observation.objects.filter(game_save=game_save, created_turn_id__lte=horizon)
    if subject is not None:
        rows = rows.filter(subject_key=subject_key_for(subject))
    if stale is not None:
        rows = rows.filter(stale=stale)
    rows = rows.order_by("-updated_turn_id", "-id")
    if trend is None:
        window = rows[offset:] if limit is None else rows[offset : offset + limit]
        return [engine_observations.Observation.from_row(row) for row in window]
    matched: list[engine_observations.Observation] = []
    skipped = 0
    for row in rows.iterator(chunk_size=TREND_SCAN_CHUNK):
        belief = engine_observations.Observation.from_row(row)
        if belief.trend(horizon) != trend:
            continue
        if skipped < offset:
            skipped += 1
            continue
        matched.append(belief)
        if limit is not None and len(matched) >= limit:
            break
    return matched


# -- mental models -------------------------------------------------------------------------


def mental_model_list(*, game_save: Save, sources_shown: int = 8) -> list[MentalModel]:
    """Return the save's mental models, each with the first beliefs it cites, in two queries.

    Each model carries `source_ids` (every cited belief id), `source_beliefs` (the first
    `sources_shown` that are still stored, retired ones included), `missing_sources` (how
    many of those first ones are gone) and `more_sources` (how many are not listed).
    """
    models = list(MentalModel.objects.filter(game_save=game_save).order_by("subject_key"))
    ids = set()
    for model in models:
        model.source_ids = [int(i) for i in model.sources or [] if str(i).lstrip("-").isdigit()]
        ids.update(model.source_ids[:sources_shown])
    beliefs = (
        {
            o.pk: o
            for o in Observation.all_objects.filter(game_save=game_save, pk__in=ids).only(
                "id", "statement", "proof_count", "deleted_turn_id", "subject"
            )
        }
        if ids
        else {}
    )
    for model in models:
        shown = model.source_ids[:sources_shown]
        model.source_beliefs = [beliefs[i] for i in shown if i in beliefs]
        model.missing_sources = len(shown) - len(model.source_beliefs)
        model.more_sources = max(len(model.source_ids) - sources_shown, 0)
    return models


def mental_model_list_at_turn(
    *, game_save: Save, horizon: int, subject: str | None = None, offset: int = 0, limit: int | None = None
) -> list[engine_models.MentalModel]:
    """Return the save's mental models created by turn `horizon`, most recently updated first.

    `subject` keeps that subject's model (case-insensitive; "" is the world model).
    """
    end = None if limit is None else offset + limit
    return engine_models.get_mental_models(game_save, max_turn_id=horizon, subject=subject, limit=end)[offset:]


# -- jobs ----------------------------------------------------------------------------------
# The Jobs page and the API read the ledger through these, never `Job.objects`; the
# ledger's own reads (`studio.memory.jobs.selectors`) are what they filter.


def job_list(
    *, game_save: Save, status: str | None = None, kind: str | None = None, turn_id: int | None = None
) -> QuerySet[Job]:
    """Return the save's jobs, newest first (`jobs_for_save`), filtered, with their save joined."""
    jobs = jobs_for_save(game_save=game_save).select_related("game_save")
    if status:
        jobs = jobs.filter(status=status)
    if kind:
        jobs = jobs.filter(kind=kind)
    if turn_id is not None:
        jobs = jobs.filter(turn_id=turn_id)
    return jobs


def job_get(*, game_save: Save, job_id: int) -> Job | None:
    """Return the save's job `job_id` with its save joined, or None (another save's job too)."""
    return job_list(game_save=game_save).filter(pk=job_id).first()


def jobs_active(*, game_save: Save) -> bool:
    """True while a job of the save is queued or running (the Jobs page keeps polling)."""
    return jobs_active_for_save(game_save=game_save)


def jobs_skipped_memory(*, game_save: Save) -> bool:
    """True when a per-turn memory job of the save ended skipped (the Jobs page offers to retry them)."""
    from studio.memory.jobs import TIMELINE_KINDS
    from studio.memory.models import JobStatus

    return jobs_for_save(game_save=game_save).filter(kind__in=TIMELINE_KINDS, status=JobStatus.SKIPPED).exists()

"""What each background job does: lore sync, turn embedding, the living pipeline, refresh.

Each handler takes a `JobContext` (the claimed Job and the runner's identity), re-reads the
rows it needs, and either returns a result dict (vector-only work: the runner marks the job
done) or writes through `JobContext.commit`, which runs the writes and the DONE status in
one transaction that first

- locks the save row (`select_for_update`), so a rewind cannot interleave;
- checks the job is still ours (a runner presumed dead must not write);
- checks the save's `timeline_generation` still equals the job's: a rewind since the job
  was queued means the job writes nothing and ends as skipped.

The living pipeline makes every LLM call first (extract, consolidate, reflect - nothing is
written while they run) and then writes facts, beliefs and mental models in that one
transaction. A failed or garbled call therefore leaves nothing half-written, and a job
re-run after a crash starts from a clean slate (its earlier run committed nothing).
"""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field

from django.db import transaction
from django.utils import timezone

from studio.memory.jobs import JobLost, JobPaused, JobSkipped, _owned, mark_finished
from studio.memory.llm import LLMError, SpendLimitExceeded, TrackedLLM, get_llm_backend
from studio.memory.models import Job, JobKind, JobStatus

logger = logging.getLogger(__name__)

MAX_FACTS_PER_TURN = 8
MAX_EXISTING_BELIEFS = 24
BELIEFS_PER_SUBJECT = 60
# The reflector reads at most this many beliefs of a subject (reflect.MAX_BELIEFS).
REFLECT_MAX_BELIEFS = 40
STALE_MODELS_PER_PASS = 5
REFRESH_MODELS_PER_JOB = 20
MAX_KNOWN_ENTITIES = 60
# Seconds between two progress writes of one job (the Jobs page polls every 2 s).
PROGRESS_INTERVAL = 0.5
WHEN_STATE_KEYS = ("when", "time", "date", "day", "in_game_time", "game_time", "clock")


@dataclass
class JobContext:
    job: Job
    worker: str
    timings: dict[str, float] = field(default_factory=dict)
    # Lookups shared by the jobs of one claimed batch (same save): lore names, missions,
    # the batch's narratives and states ("batch_turns" lists its turn ids).
    shared: dict = field(default_factory=dict)
    # The claim just wrote "running": the first progress text waits PROGRESS_INTERVAL.
    progress_written: float = field(default_factory=time.monotonic)

    def cached(self, key: str, compute):
        if key not in self.shared:
            self.shared[key] = compute()
        return self.shared[key]

    def save(self):
        from studio.saves.models import Save

        if self.job.game_save_id is None:
            return None
        return Save.objects.select_related("universe").get(pk=self.job.game_save_id)

    def progress(self, text: str, *, force: bool = False) -> None:
        """Show what the job is doing; at most one write per PROGRESS_INTERVAL (each is a
        write transaction, and a fast job would spend more on them than on its work)."""
        now = time.monotonic()
        if not force and now - self.progress_written < PROGRESS_INTERVAL:
            return
        self.progress_written = now
        Job.objects.filter(pk=self.job.pk, status=JobStatus.RUNNING).update(progress=text[:200])

    def check_timeline(self, save) -> None:
        if save.timeline_generation != self.job.timeline_generation:
            raise JobSkipped(
                f"timeline rewound (generation {self.job.timeline_generation} -> "
                f"{save.timeline_generation}); nothing written"
            )
        if self.job.turn_id is not None and self.job.kind in (JobKind.EMBED_TURN, JobKind.LIVING_TURN):
            if self.job.turn_id > save.current_turn:
                raise JobSkipped(f"turn {self.job.turn_id} no longer exists; nothing written")

    def commit(self, write, *, check_timeline: bool = True) -> dict:
        """Run `write(save)` and mark the job done, atomically, if the job may still write."""
        from studio.saves.models import Save

        started = time.perf_counter()
        with transaction.atomic():
            save = None
            if self.job.game_save_id is not None:
                save = Save.objects.select_for_update().get(pk=self.job.game_save_id)
            row = _owned(self.job.pk, self.worker)
            if row is None:
                raise JobLost()
            if check_timeline and save is not None:
                self.check_timeline(save)
            result = write(save) or {}
            self.timings["write_seconds"] = round(time.perf_counter() - started, 4)
            result = {**result, "timings": dict(self.timings)}
            mark_finished(row, JobStatus.DONE, progress="done", result=result)
        return result


def _lore_entries(universe_id: int) -> list[dict]:
    from studio.universes.models import LoreEntry

    entries = []
    for entry in LoreEntry.objects.filter(universe_id=universe_id).prefetch_related("links").order_by("pk"):
        entries.append(
            {
                "entry_id": entry.entry_id,
                "title": entry.title,
                "text": entry.text,
                "links": [link.entry_id for link in entry.links.all()],
            }
        )
    return entries


def _vector_memory():
    from studio.memory.vector import get_vector_memory

    return get_vector_memory()


# -- sync_lore -------------------------------------------------------------------------------


def run_sync_lore(ctx: JobContext):
    """Embed a Lore Book: a universe's own (then queue each save's), or one save's."""
    from studio.universes.models import EmbeddingState, LoreEntry, Universe

    job = ctx.job
    started_at = timezone.now()
    entries = _lore_entries(job.universe_id)
    save = ctx.save()
    scope_id = save.save_id if save is not None else Universe.objects.get(pk=job.universe_id).lore_scope_id
    ctx.progress(f"embedding {len(entries)} lore entries", force=True)
    t0 = time.perf_counter()
    try:
        embedded = _vector_memory().sync_lore(scope_id, entries)
    except Exception as exc:
        if save is None:
            LoreEntry.objects.filter(universe_id=job.universe_id, updated_at__lte=started_at).update(
                embedding_state=EmbeddingState.FAILED, embedding_error=f"{exc.__class__.__name__}: {exc}"[:2000]
            )
        raise
    ctx.timings["embed_seconds"] = round(time.perf_counter() - t0, 4)

    def write(_save):
        result = {"scope_id": scope_id, "entries": len(entries), "embedded": embedded}
        if save is None:
            # Entries edited while this ran keep "pending": their own sync job is queued.
            LoreEntry.objects.filter(universe_id=job.universe_id, updated_at__lte=started_at).update(
                embedding_state=EmbeddingState.EMBEDDED, embedding_error=""
            )
            from studio.memory.jobs import enqueue_sync_lore
            from studio.saves.models import Save

            queued = [enqueue_sync_lore(game_save=s).pk for s in Save.objects.filter(universe_id=job.universe_id)]
            result["save_jobs"] = queued
        return result

    ctx.commit(write, check_timeline=False)
    return None


# -- embed_turn ------------------------------------------------------------------------------


def run_embed_turn(ctx: JobContext):
    """Embed (or re-embed) one turn's narrative into the save's vector memory."""
    from studio.saves.models import Event

    save = ctx.save()
    ctx.check_timeline(save)
    event = Event.objects.filter(game_save_id=save.pk, turn_id=ctx.job.turn_id).first()
    if event is None:
        raise JobSkipped(f"turn {ctx.job.turn_id} no longer exists")
    vectors = _vector_memory()
    t0 = time.perf_counter()
    vectors.update_turn_narrative(save.save_id, event.turn_id, event.narrative)
    seconds = time.perf_counter() - t0
    save.refresh_from_db(fields=["timeline_generation", "current_turn"])
    if save.timeline_generation != ctx.job.timeline_generation:
        # A rewind ran meanwhile and may have deleted chunks before this one landed: remove
        # whatever lies beyond the live horizon again (queries never see it anyway).
        vectors.rollback(save.save_id, save.current_turn)
        raise JobSkipped("timeline rewound during embedding; the chunk was removed again")
    return {"turn_id": event.turn_id, "chars": len(event.narrative), "timings": {"embed_seconds": round(seconds, 4)}}


def run_embed_batch(contexts: list[JobContext]) -> dict[int, tuple[str, dict]]:
    """Embed several turns of one save with one model call; return each job's outcome.

    The outcome per job id is (status, {"progress", "result"}) for the runner to record in
    one transaction. Same checks as `run_embed_turn`: a job of another timeline generation,
    or of a turn that no longer exists, is skipped; a rewind during the embedding removes
    the chunks beyond the live horizon again and skips the whole batch.
    """
    from studio.saves.models import Event

    save = contexts[0].save()
    outcomes: dict[int, tuple[str, dict]] = {}
    live: list[JobContext] = []
    for ctx in contexts:
        try:
            ctx.check_timeline(save)
        except JobSkipped as exc:
            outcomes[ctx.job.pk] = (JobStatus.SKIPPED, {"progress": f"skipped: {exc}"})
            continue
        live.append(ctx)
    texts = dict(
        Event.objects.filter(game_save_id=save.pk, turn_id__in={ctx.job.turn_id for ctx in live}).values_list(
            "turn_id", "narrative"
        )
    )
    for ctx in list(live):
        if ctx.job.turn_id not in texts:
            outcomes[ctx.job.pk] = (JobStatus.SKIPPED, {"progress": f"skipped: turn {ctx.job.turn_id} no longer exists"})
            live.remove(ctx)
    if not live:
        return outcomes
    vectors = _vector_memory()
    # Turns that may already have chunks are replaced one by one; the others (the usual
    # case: new turns) are embedded together.
    fresh = fresh_turns(save, [ctx.job for ctx in live], texts)
    t0 = time.perf_counter()
    embed_turn_narratives(vectors, save.save_id, texts, fresh=fresh)
    seconds = time.perf_counter() - t0
    save.refresh_from_db(fields=["timeline_generation", "current_turn"])
    rewound = save.timeline_generation != contexts[0].job.timeline_generation
    if rewound:
        vectors.rollback(save.save_id, save.current_turn)
    for ctx in live:
        if rewound:
            outcomes[ctx.job.pk] = (
                JobStatus.SKIPPED,
                {"progress": "skipped: timeline rewound during embedding; the chunk was removed again"},
            )
            continue
        turn = ctx.job.turn_id
        outcomes[ctx.job.pk] = (
            JobStatus.DONE,
            {
                "progress": "done",
                "result": {
                    "turn_id": turn,
                    "chars": len(texts[turn]),
                    "batch": len(texts),
                    "timings": {"embed_seconds": round(seconds / len(texts), 4), "batch_embed_seconds": round(seconds, 4)},
                },
            },
        )
    return outcomes


def fresh_turns(save, batch: list[Job], texts: dict[int, str]) -> set[int]:
    """The batch's turns that cannot have narrative chunks yet: no EMBED_TURN job of that
    turn number has ever started in this save (any timeline), and the batch's own job of
    it is neither a re-run (started before this claim) nor an edit ("replace")."""
    started_before = set(
        Job.objects.filter(
            game_save_id=save.pk, kind=JobKind.EMBED_TURN, turn_id__in=list(texts), started_at__isnull=False
        )
        .exclude(pk__in=[job.pk for job in batch])
        .values_list("turn_id", flat=True)
    )
    marked = {job.turn_id for job in batch if (job.payload or {}).get("replace") or (job.payload or {}).get("rerun")}
    return {turn for turn in texts if turn not in started_before and turn not in marked}


def embed_turn_narratives(vectors, save_id: str, texts: dict[int, str], *, fresh: set[int]) -> None:
    """Embed several turns' narratives: the `fresh` ones (no chunks yet) with one
    `VectorMemory.embed_chunks` call (one encode call, one Chroma add, one corpus-version
    bump), the others with `update_turn_narrative` each (old chunks replaced).

    Only the store's public API: a turn that may have chunks (an edit, a re-run after a
    crash, a turn number reused after a rewind, a turn written by an importer and edited)
    is replaced, never duplicated. A store with a batch `update_turn_narratives(save_id,
    {turn: text})` takes every turn in one call.
    """
    turns = sorted(texts)
    batch_replace = getattr(vectors, "update_turn_narratives", None)
    if batch_replace is not None:
        batch_replace(save_id, {turn: texts[turn] for turn in turns})
        return
    new = [turn for turn in turns if turn in fresh]
    if len(new) < 2 or not hasattr(vectors, "embed_chunks"):
        new = []
    if new:
        vectors.embed_chunks(
            save_id,
            [{"turn_id": turn, "text": texts[turn], "chunk_type": "narrative"} for turn in new],
            batch_size=max(32, len(new)),
        )
    for turn in turns:
        if turn not in new:
            vectors.update_turn_narrative(save_id, turn, texts[turn])


# -- living pipeline -------------------------------------------------------------------------


def known_entities_for(save) -> list[str]:
    """Canonical names for the extractor: lore titles and aliases of the save's universe."""
    from studio.universes.models import LoreEntry

    names: list[str] = []
    seen: set[str] = set()
    for title, keys in LoreEntry.objects.filter(universe_id=save.universe_id).values_list("title", "keys"):
        for name in [title, *(keys if isinstance(keys, list) else [])]:
            name = str(name or "").strip()
            if name and name.casefold() not in seen:
                seen.add(name.casefold())
                names.append(name)
            if len(names) >= MAX_KNOWN_ENTITIES:
                return names
    return names


def when_hint_for(save, turn_id: int) -> str:
    """The story time of a turn: the turn's state (`when`, `time`, `date`...) and its number."""
    from studio.saves.models import StateCache

    state = StateCache.objects.filter(game_save_id=save.pk, turn_id=turn_id).values_list("state", flat=True).first()
    return when_hint_from_state(state, turn_id)


def when_hint_from_state(state, turn_id: int) -> str:
    if isinstance(state, dict):
        for key in WHEN_STATE_KEYS:
            value = state.get(key)
            if isinstance(value, (str, int, float)) and str(value).strip():
                return f"{value} (turn {turn_id})"
    return f"turn {turn_id}"


def _raise_for(error: Exception | None, operation: str) -> None:
    """Turn the failure an operation swallowed into the job's outcome."""
    if error is None:
        return
    if isinstance(error, SpendLimitExceeded):
        raise JobPaused(error.reason, error.resume_at)
    if isinstance(error, LLMError):
        raise error
    raise LLMOutputError(f"{operation}: the model's answer was unusable ({error})")


class LLMOutputError(LLMError):
    """The model answered, but nothing usable could be parsed (retrying may help)."""


def _project_beliefs(existing, actions, subject: str):
    """Return `subject`'s beliefs as they will be once `actions` are applied (in memory)."""
    from studio.memory.observations import Observation

    key = (subject or "").strip().casefold()
    by_id = {o.observation_id: o for o in existing}
    projected = {oid: Observation(**{**o.__dict__}) for oid, o in by_id.items()}
    created = []
    for action in actions:
        if action.kind == "CREATE":
            created.append(Observation(statement=action.statement, subject=action.subject, proof_count=1))
        elif action.kind == "UPDATE" and action.observation_id in projected:
            belief = projected[action.observation_id]
            belief.statement = action.statement
            if action.subject:
                belief.subject = action.subject
            belief.proof_count = (belief.proof_count or 0) + len(action.source_fact_ids)
        elif action.kind == "DELETE":
            projected.pop(action.observation_id, None)
    return [o for o in [*projected.values(), *created] if (o.subject or "").strip().casefold() == key]


def forget_turn_outputs(save, turn_id: int) -> dict:
    """Remove what an earlier extraction of `turn_id` produced (call in the write transaction).

    For the latest turn this is exactly a rewind of facts, beliefs and mental models to the
    turn before. For an older turn only that turn's facts go; the beliefs citing them lose
    those sources and are flagged stale, so the next consolidation re-examines them.
    """
    from studio.memory.facts import delete_facts_after
    from studio.memory.mental_models import rollback_models_for_pk
    from studio.memory.models import Fact as FactRow
    from studio.memory.models import Observation as ObservationRow
    from studio.memory.observations import rollback_beliefs_for_pk

    if turn_id >= save.current_turn:
        facts = delete_facts_after(save.pk, turn_id - 1)
        beliefs = rollback_beliefs_for_pk(save.pk, turn_id - 1)
        models = rollback_models_for_pk(save.pk, turn_id - 1)
        return {"facts": facts, "beliefs": beliefs, "models": models}
    fact_ids = set(FactRow.objects.filter(game_save_id=save.pk, turn_id=turn_id).values_list("pk", flat=True))
    FactRow.objects.filter(pk__in=fact_ids).delete()
    touched = 0
    for row in ObservationRow.objects.select_for_update().filter(game_save_id=save.pk, last_source_turn__gte=turn_id):
        kept = [s for s in row.sources or [] if int(s.get("fact_id") or 0) not in fact_ids]
        if len(kept) != len(row.sources or []):
            row.sources = kept
            row.stale = True
            row.save()
            touched += 1
    return {"facts": len(fact_ids), "beliefs": {"updated": touched}}


def beliefs_for_consolidation(save, facts, horizon: int) -> list:
    """The beliefs `consolidate` may be shown: the batch characters' and the most recent.

    `consolidate` caps and orders them itself (MAX_EXISTING_BELIEFS); reading only these
    candidates keeps the cost of a turn flat as a save accumulates beliefs.
    """
    from studio.memory.consolidate import batch_characters
    from studio.memory.observations import get_observations

    chosen: dict[int, object] = {}
    for name in batch_characters(facts):
        for belief in get_observations(save, max_turn_id=horizon, subject=name, limit=MAX_EXISTING_BELIEFS):
            chosen.setdefault(belief.observation_id, belief)
    for belief in get_observations(save, max_turn_id=horizon, limit=MAX_EXISTING_BELIEFS):
        chosen.setdefault(belief.observation_id, belief)
    return list(chosen.values())


def belief_ids(save, subject: str, turn: int) -> list[int]:
    """Ids of the beliefs a subject's mental model is built from (its sources)."""
    from studio.memory.models import Observation as ObservationRow
    from studio.memory.models import subject_key_for

    return list(
        ObservationRow.objects.filter(
            game_save_id=save.pk, subject_key=subject_key_for(subject), created_turn_id__lte=turn
        )
        .order_by("-updated_turn_id", "-id")
        .values_list("pk", flat=True)[:BELIEFS_PER_SUBJECT]
    )


def run_living_turn(ctx: JobContext):
    """Extract -> facts -> (beliefs on) consolidate -> beliefs -> reflect -> mental models."""
    from studio.memory import missions as missions_module
    from studio.memory.consolidate import consolidate_detailed
    from studio.memory.factextract import extract_facts_detailed
    from studio.memory.facts import insert_facts
    from studio.memory.mental_models import stale_subjects, upsert_mental_model
    from studio.memory.models import Fact as FactRow
    from studio.memory.observations import apply_consolidation, get_observations
    from studio.memory.reflect import affected_subjects, reflect_detailed
    from studio.saves.models import Event, StateCache

    job = ctx.job
    save = ctx.save()
    if not save.is_living:
        raise JobSkipped("the save is in classic memory mode")
    backend = get_llm_backend()
    if backend is None:
        raise JobSkipped("no LLM configured")
    ctx.check_timeline(save)
    # A batch reads its turns' narratives and states once (the first job of the batch).
    batch_turns = ctx.shared.get("batch_turns") or [job.turn_id]
    if job.turn_id not in batch_turns:
        batch_turns = [job.turn_id]
    narratives = ctx.cached(
        "narratives",
        lambda: dict(
            Event.objects.filter(game_save_id=save.pk, turn_id__in=batch_turns).values_list("turn_id", "narrative")
        ),
    )
    if job.turn_id not in narratives:
        raise JobSkipped(f"turn {job.turn_id} no longer exists")
    states = ctx.cached(
        "states",
        lambda: dict(
            StateCache.objects.filter(game_save_id=save.pk, turn_id__in=batch_turns).values_list("turn_id", "state")
        ),
    )
    turn = job.turn_id
    narrative = narratives[turn]
    llm = TrackedLLM(backend, game_save_id=save.pk, job_id=job.pk)
    try:
        llm.check_budget()
    except SpendLimitExceeded as exc:
        raise JobPaused(exc.reason, exc.resume_at) from exc

    ctx.progress("extracting facts")
    t0 = time.perf_counter()
    facts, error = extract_facts_detailed(
        llm,
        narrative,
        known_entities=ctx.cached("known_entities", lambda: known_entities_for(save)),
        when_hint=when_hint_from_state(states.get(turn), turn),
        max_facts=MAX_FACTS_PER_TURN,
    )
    _raise_for(error, "extract")
    actions = []
    summaries: dict[str, str] = {}
    subjects: list[str] = []
    if save.beliefs_enabled and facts:
        ctx.progress(f"consolidating {len(facts)} facts into beliefs")
        # A re-extraction of the latest turn replaces what that turn produced before, so
        # the beliefs it created are not shown as existing ones.
        horizon = turn - 1 if job.payload.get("reextract") and turn >= save.current_turn else turn
        existing = beliefs_for_consolidation(save, facts, horizon)
        mission = ctx.cached("mission", lambda: missions_module.get_universe_mission(save))
        missions = ctx.cached("missions", lambda: missions_module.get_belief_missions(save))
        actions, error = consolidate_detailed(
            llm, facts, existing, mission=mission, missions=missions, max_existing=MAX_EXISTING_BELIEFS
        )
        _raise_for(error, "consolidate")
        subjects = affected_subjects(actions)
        for stale in stale_subjects(save, max_turn_id=turn, limit=STALE_MODELS_PER_PASS):
            if stale.casefold() not in {s.casefold() for s in subjects}:
                subjects.append(stale)
        for subject in subjects:
            ctx.progress(f"reflecting on {subject or 'the world'}")
            current = get_observations(save, max_turn_id=turn, subject=subject, limit=REFLECT_MAX_BELIEFS)
            beliefs = _project_beliefs(current, actions, subject)
            subject_mission = missions.get(subject) or next(
                (m for name, m in missions.items() if name.casefold() == subject.casefold()), mission
            )
            summary, error = reflect_detailed(llm, subject, beliefs, mission=subject_mission)
            _raise_for(error, "reflect")
            if summary:
                summaries[subject] = summary
    ctx.timings["llm_seconds"] = round(time.perf_counter() - t0, 4)
    ctx.timings["llm_calls"] = llm.calls

    def write(locked_save):
        forgotten = {}
        if job.payload.get("reextract") or FactRow.objects.filter(game_save_id=locked_save.pk, turn_id=turn).exists():
            forgotten = forget_turn_outputs(locked_save, turn)
        provisional = {f.fact_id: f for f in facts}
        for fact in facts:
            fact.fact_id = None
        fact_ids = insert_facts(locked_save, turn, facts)
        real_id = {tmp: f.fact_id for tmp, f in provisional.items() if f.fact_id is not None}
        for action in actions:
            action.source_fact_ids = [real_id[i] for i in action.source_fact_ids if i in real_id]
        counts = (
            apply_consolidation(locked_save, turn, actions, {fid: turn for fid in fact_ids})
            if actions
            else {}
        )
        models = []
        for subject, summary in summaries.items():
            upsert_mental_model(
                locked_save, subject, summary, turn, sources=belief_ids(locked_save, subject, turn)
            )
            models.append(subject)
        return {
            "turn_id": turn,
            "facts": len(fact_ids),
            "beliefs": counts,
            "mental_models": models,
            "llm_calls": llm.calls,
            "llm_tokens": llm.tokens,
            "reextracted": forgotten,
        }

    ctx.commit(write)
    return None


# -- refresh of stale mental models ----------------------------------------------------------


def run_refresh_models(ctx: JobContext):
    """Regenerate the mental models a rewind flagged stale, from the rewound beliefs."""
    from studio.memory import missions as missions_module
    from studio.memory.mental_models import stale_subjects, upsert_mental_model
    from studio.memory.observations import get_observations
    from studio.memory.reflect import reflect_detailed

    save = ctx.save()
    if not save.is_living:
        raise JobSkipped("the save is in classic memory mode")
    backend = get_llm_backend()
    if backend is None:
        raise JobSkipped("no LLM configured")
    ctx.check_timeline(save)
    llm = TrackedLLM(backend, game_save_id=save.pk, job_id=ctx.job.pk)
    turn = save.current_turn
    mission = missions_module.get_universe_mission(save)
    missions = missions_module.get_belief_missions(save)
    summaries: dict[str, tuple[str, list[int]]] = {}
    for subject in stale_subjects(save, max_turn_id=turn, limit=REFRESH_MODELS_PER_JOB):
        beliefs = get_observations(save, max_turn_id=turn, subject=subject, limit=BELIEFS_PER_SUBJECT)
        summary, error = reflect_detailed(llm, subject, beliefs, mission=missions.get(subject) or mission)
        _raise_for(error, "reflect")
        if summary:
            summaries[subject] = (summary, [b.observation_id for b in beliefs])

    def write(locked_save):
        for subject, (summary, sources) in summaries.items():
            upsert_mental_model(locked_save, subject, summary, locked_save.current_turn, sources=sources)
        return {"refreshed": sorted(summaries), "llm_calls": llm.calls}

    ctx.commit(write)
    return None


HANDLERS = {
    JobKind.SYNC_LORE: run_sync_lore,
    JobKind.EMBED_TURN: run_embed_turn,
    JobKind.LIVING_TURN: run_living_turn,
    JobKind.REFRESH_MODELS: run_refresh_models,
}

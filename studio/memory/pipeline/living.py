"""LIVING_TURN and REFRESH_MODELS: the living pipeline of a turn, and the model refresh.

A living job makes every LLM call first (extract, then with beliefs on consolidate and
reflect on the affected subjects, each through the spend guard) and writes nothing while
they run; then one `JobContext.commit` writes facts, beliefs and mental models with the
job's DONE status, after the ownership and timeline checks. A bad answer at any step
leaves nothing written; the job is retried by the ledger. A spend guard over its cap
pauses the job (`JobPaused`) until the window allows.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from studio.memory import missions as missions_module
from studio.plural import counted
from studio.memory.consolidate import batch_characters, consolidate_detailed
from studio.memory.factextract import extract_facts_detailed
from studio.memory.knowledge.beliefs import assign_holders, drop_mission_restatements
from studio.memory.knowledge.extract import Scene
from studio.memory.knowledge.models import Reveal, RevealSource
from studio.memory.knowledge.names import character_index
from studio.memory.knowledge.presence import presence_from_extractor
from studio.memory.knowledge.reveals import reveal_add
from studio.memory import timeline
from studio.memory.facts import insert_facts
from studio.memory.jobs import JobContext, JobPaused, JobSkipped
from studio.memory.llm import LLMError, SpendLimitExceeded, TrackedLLM, get_llm_backend
from studio.memory.recall.macros import macro_names
from studio.memory.mental_models import stale_subjects, upsert_mental_model
from studio.memory.models import Fact as FactRow
from studio.memory.models import Observation as ObservationRow
from studio.memory.models import subject_key_for
from studio.memory.observations import (
    Observation,
    apply_consolidation,
    beliefs_drop_missing_sources,
    get_observations,
)
from studio.memory.reflect import affected_subjects, reflect_detailed
from studio.memory.turn_rows import turns_q

MAX_FACTS_PER_TURN = 8
MAX_EXISTING_BELIEFS = 24
BELIEFS_PER_SUBJECT = 60
# The reflector reads at most this many beliefs of a subject (reflect.MAX_BELIEFS).
REFLECT_MAX_BELIEFS = 40
STALE_MODELS_PER_PASS = 5
REFRESH_MODELS_PER_JOB = 20
MAX_KNOWN_ENTITIES = 60
WHEN_STATE_KEYS = ("when", "time", "date", "day", "in_game_time", "game_time", "clock")


def known_entities_for(save) -> list[str]:
    """Canonical names for the extractor: lore titles and aliases of the save's universe."""
    from studio.world.models import LoreEntry

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


def when_hint_from_state(state, turn_id: int) -> str:
    """The story time of a turn: its state's `when` (`time`, `date`...) and its number."""
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

    For the latest turn this is the registry's rewind of what a turn's extraction derives (the
    `living` tables: facts, beliefs, mental models; `timeline.roll_back(..., living=True)`) to
    the turn before; return its counts. For an older turn only that turn's facts go; the beliefs citing them lose
    those sources and are flagged stale, so the next consolidation re-examines them, and a
    belief left with no source at all is retired at the save's current turn, in its trail
    (`observations.beliefs_drop_missing_sources`: it no longer reaches the narrator).
    """
    if turn_id >= save.current_turn:
        return timeline.roll_back(save, turn_id - 1, living=True)
    fact_ids = set(FactRow.objects.filter(game_save_id=save.pk, turn_id=turn_id).values_list("pk", flat=True))
    FactRow.objects.filter(pk__in=fact_ids).delete()
    rows = ObservationRow.objects.select_for_update().filter(game_save_id=save.pk, last_source_turn__gte=turn_id)
    done = beliefs_drop_missing_sources(
        save.pk,
        save.current_turn,
        rows=rows,
        gone=fact_ids,
        reason=f"every fact it stood on is gone: turn {turn_id} was edited and extracted again",
    )
    return {"facts": len(fact_ids), "beliefs": {"updated": done["dropped"], "retired": done["retired"]}}


def beliefs_for_consolidation(save, facts, horizon: int) -> list:
    """The beliefs `consolidate` may be shown: those the batch can bear on.

    The batch characters' beliefs and the beliefs about the world (no subject), the most
    recent first; `consolidate` caps and orders them itself (MAX_EXISTING_BELIEFS). A belief
    about a character the new facts do not name is left out: no fact of this turn is
    evidence about it, and small models shown one "update" it with whatever the facts say
    (measured on Qwen2.5-Coder-1.5B over the demo: every turn re-asserted the one belief it
    was shown, about a character absent from the turn, and created nothing). Reading only
    these candidates also keeps the cost of a turn flat as a save accumulates beliefs.
    """
    chosen: dict[int, object] = {}
    for name in batch_characters(facts):
        for belief in get_observations(save, max_turn_id=horizon, subject=name, limit=MAX_EXISTING_BELIEFS):
            chosen.setdefault(belief.observation_id, belief)
    for belief in get_observations(save, max_turn_id=horizon, subject="", limit=MAX_EXISTING_BELIEFS):
        chosen.setdefault(belief.observation_id, belief)
    return list(chosen.values())


def belief_ids(save, subject: str, turn: int) -> list[int]:
    """Ids of the beliefs a subject's mental model is built from (its sources)."""
    return list(
        ObservationRow.objects.filter(
            game_save_id=save.pk, subject_key=subject_key_for(subject), created_turn_id__lte=turn
        )
        .order_by("-updated_turn_id", "-id")
        .values_list("pk", flat=True)[:BELIEFS_PER_SUBJECT]
    )


def player_character_for(save) -> str | None:
    """Return the save's player character, who "you" is in the narration: `{{user}}` (`macros.macro_names`)."""
    return macro_names(universe=save.universe, save=save).user or None


@dataclass
class TurnPlan:
    """What a living job's LLM calls produced for its turn, before anything is written."""

    facts: list = field(default_factory=list)
    actions: list = field(default_factory=list)
    summaries: dict[str, str] = field(default_factory=dict)
    scene: Any = None  # who is present, who told whom (studio.memory.knowledge.extract.Scene)


def start_living_job(ctx: JobContext):
    """Return the job's save and backend, or raise JobSkipped (classic mode, no LLM, rewound)."""
    save = ctx.save()
    if not save.is_living:
        raise JobSkipped("the save is in classic memory mode")
    backend = get_llm_backend()
    if backend is None:
        raise JobSkipped("no LLM configured")
    ctx.check_timeline(save)
    return save, backend


def turn_inputs(ctx: JobContext, save) -> tuple[str, object]:
    """Return the job's turn narrative and state (a batch reads its turns' rows once)."""
    from studio.world.models import Event, StateCache

    turn = ctx.job.turn_id
    batch_turns = ctx.shared.get("batch_turns") or [turn]
    if turn not in batch_turns:
        batch_turns = [turn]
    narratives = ctx.cached(
        "narratives",
        lambda: dict(
            Event.objects.filter(turns_q(batch_turns), game_save_id=save.pk).values_list("turn_id", "narrative")
        ),
    )
    if turn not in narratives:
        raise JobSkipped(f"turn {turn} no longer exists")
    states = ctx.cached(
        "states",
        lambda: dict(
            StateCache.objects.filter(turns_q(batch_turns), game_save_id=save.pk).values_list("turn_id", "state")
        ),
    )
    return narratives[turn], states.get(turn)


def extract_turn_facts(ctx: JobContext, save, llm, narrative: str, state, scene=None) -> list:
    """The extract call: the turn's facts (provisional ids); with `scene`, who is present and
    who told whom are asked in the same call and filled into it."""
    turn = ctx.job.turn_id
    ctx.progress("extracting facts", force=True)  # a step: shown (and timed) at once
    facts, error = extract_facts_detailed(
        llm,
        narrative,
        known_entities=ctx.cached("known_entities", lambda: known_entities_for(save)),
        when_hint=when_hint_from_state(state, turn),
        max_facts=MAX_FACTS_PER_TURN,
        player_character=player_character_for(save),
        scene=scene,
    )
    _raise_for(error, "extract")
    return facts


def consolidate_turn(ctx: JobContext, save, llm, facts) -> list:
    """The consolidate call: what the facts do to the beliefs they bear on."""
    turn = ctx.job.turn_id
    ctx.progress(f"consolidating {counted(len(facts), 'fact')} into beliefs", force=True)
    # A re-extraction of the latest turn replaces what that turn produced before, so
    # the beliefs it created are not shown as existing ones.
    horizon = turn - 1 if ctx.job.payload.get("reextract") and turn >= save.current_turn else turn
    actions, error = consolidate_detailed(
        llm,
        facts,
        beliefs_for_consolidation(save, facts, horizon),
        mission=ctx.cached("mission", lambda: missions_module.get_universe_mission(save)),
        missions=ctx.cached("missions", lambda: missions_module.get_belief_missions(save)),
        max_existing=MAX_EXISTING_BELIEFS,
        player_character=player_character_for(save),
    )
    _raise_for(error, "consolidate")
    return actions


def reflect_turn(ctx: JobContext, save, llm, actions) -> dict[str, str]:
    """The reflect calls: a new mental model for each subject the actions touched (and a few
    stale ones), from its beliefs as they will be once the actions are applied."""
    turn = ctx.job.turn_id
    mission = ctx.cached("mission", lambda: missions_module.get_universe_mission(save))
    missions = ctx.cached("missions", lambda: missions_module.get_belief_missions(save))
    subjects = affected_subjects(actions)
    for stale in stale_subjects(save, max_turn_id=turn, limit=STALE_MODELS_PER_PASS):
        if stale.casefold() not in {s.casefold() for s in subjects}:
            subjects.append(stale)
    summaries: dict[str, str] = {}
    for subject in subjects:
        ctx.progress(f"reflecting on {subject or 'the world'}", force=True)
        current = get_observations(save, max_turn_id=turn, subject=subject, limit=REFLECT_MAX_BELIEFS)
        beliefs = _project_beliefs(current, actions, subject)
        subject_mission = missions.get(subject) or next(
            (m for name, m in missions.items() if name.casefold() == subject.casefold()), mission
        )
        summary, error = reflect_detailed(
            llm, subject, beliefs, mission=subject_mission, player_character=player_character_for(save)
        )
        _raise_for(error, "reflect")
        if summary:
            summaries[subject] = summary
    return summaries


def plan_turn(ctx: JobContext, save, llm, narrative: str, state) -> TurnPlan:
    """Make every LLM call of the turn (nothing is written while they run)."""
    characters = ctx.cached("characters", lambda: character_index(save.universe, save=save).all_characters())
    scene = Scene(characters=characters) if characters else None
    plan = TurnPlan(facts=extract_turn_facts(ctx, save, llm, narrative, state, scene=scene), scene=scene)
    if save.beliefs_enabled and plan.facts:
        plan.actions = consolidate_turn(ctx, save, llm, plan.facts)
        plan.summaries = reflect_turn(ctx, save, llm, plan.actions)
    return plan


def write_turn(locked_save, job, plan: TurnPlan, llm) -> dict:
    """Write the turn's facts, beliefs and mental models (inside `JobContext.commit`)."""
    turn = job.turn_id
    forgotten = {}
    if job.payload.get("reextract") or FactRow.objects.filter(game_save_id=locked_save.pk, turn_id=turn).exists():
        forgotten = forget_turn_outputs(locked_save, turn)
    provisional = {f.fact_id: f for f in plan.facts}
    for fact in plan.facts:
        fact.fact_id = None
    fact_ids = insert_facts(locked_save, turn, plan.facts)
    record_scene(locked_save, turn, plan.scene, fact_ids, reextract=bool(forgotten))
    real_id = {tmp: f.fact_id for tmp, f in provisional.items() if f.fact_id is not None}
    for action in plan.actions:
        action.source_fact_ids = [real_id[i] for i in action.source_fact_ids if i in real_id]
    missions = missions_module.get_belief_missions(locked_save)
    actions = drop_mission_restatements(
        plan.actions, mission=missions_module.get_universe_mission(locked_save), missions=missions
    )
    counts = apply_consolidation(locked_save, turn, actions, {fid: turn for fid in fact_ids}) if actions else {}
    if len(actions) < len(plan.actions):
        counts = {**counts, "refused_mission_restatements": len(plan.actions) - len(actions)}
    if actions:
        assign_holders(locked_save, turn, missions=missions)
    models = []
    for subject, summary in plan.summaries.items():
        upsert_mental_model(locked_save, subject, summary, turn, sources=belief_ids(locked_save, subject, turn))
        models.append(subject)
    result = {
        "turn_id": turn,
        "facts": len(fact_ids),
        "beliefs": counts,
        "mental_models": models,
        "llm_calls": llm.calls,
        "llm_tokens": llm.tokens,
        "reextracted": forgotten,
    }
    if llm.truncated:
        # Answers cut at the token limit: their complete items were kept; the record says
        # which operation to give more tokens (AXIOM_LLM_MAX_TOKENS_<OPERATION>).
        result["truncated"] = list(llm.truncated)
    return result


def record_scene(locked_save, turn: int, scene, fact_ids: list[int], *, reextract: bool) -> None:
    """Write what the extractor said of the scene: presence (never over the state's or the
    playtester's) and one reveal per listener of a told fact (studio.memory.knowledge)."""
    if reextract:
        Reveal.objects.filter(game_save_id=locked_save.pk, turn_id=turn, source=RevealSource.EXTRACTOR).delete()
    if scene is None:
        return
    if scene.present:
        presence_from_extractor(game_save=locked_save, turn_id=turn, names=scene.present)
    told = [
        (fact_ids[position], speaker, listeners)
        for position, (speaker, listeners) in scene.told.items()
        if position < len(fact_ids)
    ]
    index = character_index(locked_save.universe, save=locked_save) if told else None  # once, not per listener
    for fact_id, speaker, listeners in told:
        for listener in listeners:
            reveal_add(
                game_save=locked_save,
                turn_id=turn,
                character=listener,
                fact_id=fact_id,
                told_by=speaker,
                source=RevealSource.EXTRACTOR,
                locked=True,
                index=index,
            )


def run_living_turn(ctx: JobContext):
    """Extract -> facts -> (beliefs on) consolidate -> beliefs -> reflect -> mental models."""
    save, backend = start_living_job(ctx)
    narrative, state = turn_inputs(ctx, save)
    llm = TrackedLLM(backend, game_save_id=save.pk, job_id=ctx.job.pk)
    try:
        llm.check_budget()
    except SpendLimitExceeded as exc:
        raise JobPaused(exc.reason, exc.resume_at) from exc
    t0 = time.perf_counter()
    plan = plan_turn(ctx, save, llm, narrative, state)
    ctx.timings["llm_seconds"] = round(time.perf_counter() - t0, 4)
    ctx.timings["llm_calls"] = llm.calls
    ctx.commit(lambda locked_save: write_turn(locked_save, ctx.job, plan, llm))
    return None


# -- refresh of stale mental models ----------------------------------------------------------


def run_refresh_models(ctx: JobContext):
    """Regenerate the mental models a rewind flagged stale, from the rewound beliefs."""
    save, backend = start_living_job(ctx)
    llm = TrackedLLM(backend, game_save_id=save.pk, job_id=ctx.job.pk)
    player_character = player_character_for(save)
    turn = save.current_turn
    mission = missions_module.get_universe_mission(save)
    missions = missions_module.get_belief_missions(save)
    summaries: dict[str, tuple[str, list[int]]] = {}
    for subject in stale_subjects(save, max_turn_id=turn, limit=REFRESH_MODELS_PER_JOB):
        beliefs = get_observations(save, max_turn_id=turn, subject=subject, limit=BELIEFS_PER_SUBJECT)
        summary, error = reflect_detailed(
            llm, subject, beliefs, mission=missions.get(subject) or mission, player_character=player_character
        )
        _raise_for(error, "reflect")
        if summary:
            summaries[subject] = (summary, [b.observation_id for b in beliefs])

    def write(locked_save):
        # The models are as of the turn their beliefs were read at (a rewind since then that
        # kept it without changing memory leaves them true at its target).
        as_of = min(turn, locked_save.current_turn)
        for subject, (summary, sources) in summaries.items():
            upsert_mental_model(locked_save, subject, summary, as_of, sources=sources)
        result = {"refreshed": sorted(summaries), "llm_calls": llm.calls}
        if llm.truncated:
            result["truncated"] = list(llm.truncated)
        return result

    ctx.commit(write)
    return None

"""`continuity_check`: one proposed narration checked against memory at its turn and point of view.

The one entry point every caller uses (the Console's drafts, the API's narrate, the memory
proxy's answers, the bench): read the save at its current turn N (the narration is for N + 1),
read the narration (`text.read_narration`), run the deterministic checks (`checks`: leaks,
presence; `contradictions`: candidates), then, when the guard's settings allow and a model is
connected, one judge call for the candidates (and the leaks with `confirm_leaks`). The judge
is spend-guarded twice: the save's guard (`TrackedLLM`) and the guard's own cap per save and
hour (`continuity_guard_calls_per_hour`, LLM calls of operation "guard"). A judge that fails or
is refused leaves the candidates possible and says why in `notes`; nothing here raises for it.
"""

from __future__ import annotations

import logging
from datetime import timedelta

from studio.memory.continuity.checks import GuardContext, check_leaks, check_presence
from studio.memory.continuity.contradictions import JUDGE_SYSTEM, LEAK_SYSTEM, contradiction_candidates, judge
from studio.memory.continuity.findings import CheckResult
from studio.memory.continuity.settings import GuardSettings, guard_settings
from studio.memory.continuity.text import addressed_in, read_narration

__all__ = ["continuity_check", "guard_calls_last_hour", "settings_for"]

logger = logging.getLogger(__name__)


def settings_for(game_save) -> GuardSettings:
    """Return the guard's settings from the save's universe's meta."""
    return guard_settings(game_save.universe.meta_values())


def guard_calls_last_hour(game_save) -> int:
    """The guard's judge calls for this save in the last hour (refusals not counted)."""
    from django.utils import timezone

    from studio.memory.models import LLMCall

    return LLMCall.objects.filter(
        game_save_id=game_save.pk, operation="guard", refused=False, created_at__gt=timezone.now() - timedelta(hours=1)
    ).count()


def _embedder():
    from studio.memory.vector import get_vector_memory

    try:
        return get_vector_memory().text_embedder()
    except Exception:  # noqa: BLE001 - without an embedder the leak check uses terms alone
        return None


VECTOR_MEMORY_EMBEDDER = object()  # the default: the vector memory's embedder, when it has one


def continuity_check(
    game_save,
    *,
    text: str,
    player_input: str = "",
    settings: GuardSettings | None = None,
    llm=None,
    use_model: bool = True,
    embedder=VECTOR_MEMORY_EMBEDDER,
    index=None,
    user_id: int | None = None,
    horizon: int | None = None,
    universe_meta: dict | None = None,
) -> CheckResult:
    """Check `text`, proposed as the save's next turn after `player_input`; return what it found.

    `llm`: a backend (default: the configured one; None and no endpoint: deterministic only);
    `use_model=False` never calls a model; `embedder`: the sentence embedder (default: the
    vector memory's, when it has one; None: terms alone); `horizon`: check as proposed after that turn (the bench; default the
    save's current turn); `universe_meta`: the meta the caller read (then none is read here).
    """
    settings = settings or (settings_for(game_save) if universe_meta is None else guard_settings(universe_meta))
    horizon = game_save.current_turn if horizon is None else min(int(horizon), game_save.current_turn)
    result = CheckResult(turn_id=horizon + 1)
    if not (text or "").strip():
        return result
    if index is None:
        from studio.memory.knowledge.names import character_index

        index = character_index(game_save.universe, save=game_save, universe_meta=universe_meta)
    ctx = GuardContext(
        game_save,
        horizon=horizon,
        player_input=player_input,
        index=index,
        embedder=_embedder() if embedder is VECTOR_MEMORY_EMBEDDER else embedder,
    )
    sentences = read_narration(text, ctx.index, addressed=addressed_in(player_input, ctx.index))
    result.sentences = [s.as_dict() for s in sentences]
    result.findings = check_leaks(ctx, sentences) + check_presence(ctx, sentences)
    leaked = {f.sentence for f in result.findings if f.kind == "leak"}
    candidates = [c for c in contradiction_candidates(ctx, sentences) if c.sentence not in leaked]
    candidates = candidates[: settings.max_candidates]
    result.findings += candidates
    if use_model and settings.judge and (candidates or (settings.confirm_leaks and result.of_kind("leak"))):
        _judge(game_save, result, candidates, settings, llm=llm, user_id=user_id)
    elif candidates:
        result.notes.append(
            "Possible contradictions are shown unjudged: "
            + ("the guard's judge is off (continuity_guard_judge)." if not settings.judge else "no model was asked.")
        )
    return result


def _judge(game_save, result: CheckResult, candidates, settings: GuardSettings, *, llm, user_id) -> None:
    from studio.memory.llm import LLMError, TrackedLLM, get_llm_backend

    backend = llm if llm is not None else get_llm_backend()
    if backend is None:
        result.notes.append("Possible contradictions are shown unjudged: no model is connected.")
        return
    calls = [candidates] if candidates else []
    if settings.confirm_leaks and result.of_kind("leak"):
        calls.append(result.of_kind("leak"))
    tracked = TrackedLLM(backend, game_save_id=game_save.pk, user_id=user_id)
    for group in calls:
        if settings.calls_per_hour <= 0 or guard_calls_last_hour(game_save) >= settings.calls_per_hour:
            result.notes.append(
                f"The guard's judge is paused: {settings.calls_per_hour} calls in the last hour for "
                "this save (continuity_guard_calls_per_hour); shown unjudged."
            )
            return
        try:
            tracked.check_budget()
            judge(tracked, group, system=LEAK_SYSTEM if group[0].kind == "leak" else JUDGE_SYSTEM)
            result.calls += 1
            result.judged = True
        except LLMError as exc:
            result.notes.append(f"The guard's judge could not answer ({exc}); shown unjudged.")
            logger.info("continuity judge failed for save %s: %s", game_save.pk, exc)
            return

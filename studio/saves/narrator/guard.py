"""The continuity guard in play: a narration checked when it is proposed, its findings beside the draft.

The universe's `continuity_guard` setting (docs/continuity.md) decides:

- **off**: nothing is checked;
- **warn**: when an alternative has been written (`narration_stream` ends with it done), the
  guard checks it (`memory.continuity.guard.continuity_check`) and records its findings as rows
  of the draft's turn; the Console shows them beside the draft with three choices: regenerate
  with the findings as instructions (`regenerate_with_findings`), edit, or accept anyway;
- **regenerate once**: the same, and when findings stand (a leak, a character off scene, a
  contradiction the model confirmed) a new alternative is added at once with the findings as
  instructions; the first stays as an alternative. A regenerated alternative is never
  regenerated again by the guard (once), whatever it holds. `wants_regeneration` decides; the
  narrator's services add the alternative (this module imports none: they hand
  `narrator_regenerate` in).

A regenerated alternative's prompt is its base prompt with the findings it was asked to avoid
after the action (`with_instructions`: the same text the bench measures). Accepting records
what became of the draft's findings (`accept_findings`, in the accept's transaction): accepted
anyway, fixed by the playtester's edit (the edited text is checked again), or left behind with
an alternative that was not accepted. The API's narrate returns a check's findings without
storing them (`check_narration`); the memory proxy checks each answer when it ends (deterministic;
with the model too if the front end asks, `X-Axiom-Continuity: check`), and when its next message
settles it, checks it only if the text was not checked (`check_settled`: `checked_digest`); it
never regenerates what it has relayed.
"""

from __future__ import annotations

import hashlib
import logging

from studio.memory.continuity.findings import CheckResult, instructions_text
from studio.memory.continuity.guard import continuity_check, settings_for
from studio.memory.continuity.models import FindingResolution
from studio.memory.continuity.settings import guard_settings
from studio.memory.continuity.selectors import findings_for_proposal, instructions_for
from studio.memory.continuity.services import findings_at_accept, findings_record, findings_resolve

__all__ = [
    "instructions_text",
    "settings_for",
    "triggers_regeneration",
    "wants_regeneration",
    "accept_check",
    "check_settled",
    "regenerated_pending",
    "accept_findings",
    "check_alternative",
    "check_narration",
    "regenerate_with_findings",
    "with_instructions",
]

logger = logging.getLogger(__name__)


def check_narration(
    *,
    game_save,
    text: str,
    player_input: str,
    user_id: int | None = None,
    use_model: bool = True,
    meta: dict | None = None,
) -> CheckResult | None:
    """Check a proposed narration for the save's next turn (None when the guard is off); never raises.
    `meta`: the meta the narration's prompt read (then the guard reads none)."""
    settings = settings_for(game_save) if meta is None else guard_settings(meta)
    if not settings.on:
        return None
    try:
        return continuity_check(
            game_save,
            text=text,
            player_input=player_input,
            settings=settings,
            user_id=user_id,
            use_model=use_model,
            universe_meta=meta,
        )
    except Exception:  # noqa: BLE001 - a check that breaks must never lose the narration
        logger.exception("continuity check of save %s failed", game_save.pk)
        return None


def triggers_regeneration(result: CheckResult) -> list:
    """The findings that make "regenerate once" narrate again: those that stand and are more than possible."""
    return [f for f in result.standing if f.verdict != "candidate"]


def check_alternative(*, alternative, use_model: bool = True, meta: dict | None = None) -> CheckResult | None:
    """Check a finished alternative and record its findings; return the check (None: guard off or nothing to check).
    `meta`: the meta its prompt read (then the guard reads none)."""
    draft = alternative.draft
    if not (alternative.text or "").strip():
        return None
    result = check_narration(
        game_save=draft.game_save,
        text=alternative.text,
        player_input=draft.player_input,
        use_model=use_model,
        meta=meta,
    )
    if result is not None:
        findings_record(
            game_save=draft.game_save,
            result=result,
            draft_id=draft.pk,
            alternative=alternative.number,
            turn_id=draft.turn_id,
        )
        alternative.checked_digest = text_digest(alternative.text)
        type(alternative).objects.filter(pk=alternative.pk).update(checked_digest=alternative.checked_digest)
    return result


def text_digest(text: str) -> str:
    """What `NarratorAlternative.checked_digest` holds for a checked text."""
    return hashlib.sha256(text.encode()).hexdigest()


def wants_regeneration(*, alternative, result: CheckResult | None, meta: dict | None = None) -> bool:
    """Whether "regenerate once" narrates `alternative` again: findings stand, and it was not itself regenerated."""
    if result is None or not triggers_regeneration(result):
        return False
    settings = settings_for(alternative.draft.game_save) if meta is None else guard_settings(meta)
    return settings.regenerates and not instructions_for(
        game_save=alternative.draft.game_save, draft_id=alternative.draft_id, alternative=alternative.number
    )


def regenerate_with_findings(*, draft, number: int, regenerate):
    """Add an alternative to the draft (`regenerate`: the narrator's `narrator_regenerate`) that is asked to avoid
    alternative `number`'s findings; return it."""
    new = regenerate(draft=draft)
    findings_resolve(
        game_save=draft.game_save,
        draft_id=draft.pk,
        alternative=number,
        resolution=FindingResolution.REGENERATED,
        regenerated_as=new.number,
    )
    return new


def regenerated_pending(*, alternative):
    """The pending alternative the guard regenerated `alternative` as, if any (the page without JavaScript writes it)."""
    from studio.saves.models import AlternativeStatus

    numbers = {
        row
        for row in alternative.draft.game_save.continuity_findings.filter(
            draft_id=alternative.draft_id, alternative=alternative.number
        ).values_list("regenerated_as", flat=True)
        if row
    }
    return alternative.draft.alternatives.filter(number__in=numbers, status=AlternativeStatus.PENDING).first()


def with_instructions(user_prompt: str, *, draft, number: int) -> str:
    """Return the user prompt of alternative `number` with the findings it was asked to avoid, after the action."""
    notes = instructions_text(instructions_for(game_save=draft.game_save, draft_id=draft.pk, alternative=number))
    return f"{user_prompt}\n\n{notes}" if notes else user_prompt


def check_settled(*, draft, number: int) -> None:
    """The memory proxy's answer, settled by the chat's next message: check it now unless its text was checked
    when it ended (the proxy checks each answer when it ends; `X-Axiom-Continuity: check` with the model too).
    Deterministic only: the save is locked while the chat syncs."""
    alternative = draft.alternatives.filter(number=number).defer("context", "system_prompt", "user_prompt").first()
    if alternative is None or alternative.checked_digest == text_digest(alternative.text):
        return
    if findings_for_proposal(game_save=draft.game_save, draft_id=draft.pk, alternative=number):
        return  # checked before checks were marked: its findings are there
    alternative.draft = draft
    check_alternative(alternative=alternative, use_model=False)


def accept_check(*, draft, text: str, edited: bool) -> CheckResult | None:
    """Check the playtester's edited text before it is appended (None when not edited, or the guard is off)."""
    if not edited:
        return None
    return check_narration(game_save=draft.game_save, text=text, player_input=draft.player_input)


def accept_findings(*, draft, number: int, edited_result: CheckResult | None) -> None:
    """Record, in the accept's transaction, what accepting alternative `number` does to the draft's findings
    (`edited_result`: `accept_check` of the edited text)."""
    findings_at_accept(game_save=draft.game_save, draft_id=draft.pk, alternative=number, edited_result=edited_result)

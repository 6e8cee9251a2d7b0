"""The Console's play controls beyond narrate / regenerate / accept.

- `shape_action`: the Do / Say / Story input modes (AI Dungeon's): "Do" makes "open the
  door" the action "You open the door.", "Say" makes "hello" `You say: "hello"`, "Story"
  passes the text as written (a line of story the narrator continues from).
- `narrator_continue`: a new alternative that extends the chosen one (done, or stopped
  with text): streamed like any other, its text is the old text plus what the model adds.
- `last_turn_reopen` / `last_turn_undo`: Retry, Continue and Undo of the last turn. Each is
  a rewind by one (`CheckpointManager.rewind` with the expected current turn, so a page made
  for another turn changes nothing) in one transaction with what follows: reopen makes the
  undone turn a draft again with every alternative it had kept (the turn's text is
  alternative 1 when it was written by hand or edited), and Retry adds a new one to stream,
  Continue one that extends the text; Undo hands back the undone turn's action for the
  action box and keeps the turn as an `undone` draft, so it can be put back.
- `last_turn_swipe`: the swipe arrows of the last turn. They never rewind: the turn stays,
  its text becomes the chosen alternative (`turn_update_narrative`, which re-embeds and, in
  living memory, re-extracts it; a swipe made before that job started supersedes it). A
  text that is none of the alternatives (edited) is kept as one first, so nothing is lost.
  The turn's narrator snapshot then describes the chosen alternative (`snapshots.snapshot_choose`:
  the prompt and memory the narrator read for it, its model, usage and play settings).
- `draft_restore`: nothing set aside is lost until the next turn is accepted. A discarded
  draft, or the turn Undo took back, stays with its alternatives while its turn is the
  save's next one (`set_aside_drafts` lists them; a rewind deletes drafts after its target,
  an accepted turn moves the next turn on); restoring it reopens it, and the view accepts
  an undone turn's text at once ("Put turn N back").
- `continue_once`: the API's Continue, which stores nothing.

The opening turn (the universe's or its card's greetings) is in opening.py; Impersonate (the
model writes the player's next action) in impersonate.py.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from django.db import transaction

from studio import limits
from studio.memory.llm import TrackedLLM, get_llm_backend
from studio.saves.narrator.continuation import continue_prompt, join_continuation
from studio.saves.models import AlternativeStatus, DraftStatus, NarratorAlternative, NarratorDraft
from studio.world.models import Save

MODES = (("do", "Do"), ("say", "Say"), ("story", "Story"))
MODE_HELP = {
    "do": "An action: “open the door” becomes “You open the door.”",
    "say": 'Words the player character says: “hello” becomes “You say: "hello"”.',
    "story": "A line of story, as written; the narrator continues from it.",
}
HAND_SOURCE = "as the turn was"


class PlayError(Exception):
    """A play control that cannot be done as asked (nothing was changed)."""


def shape_action(text: str, mode: str) -> str:
    """Return the player's `text` as the action of input mode `mode` (do / say / story)."""
    text = (text or "").strip()
    if not text or mode not in ("do", "say"):
        return text
    if mode == "say":
        if text[0] in "\"“'":
            return f"You say: {text}"
        return f"You say: \u201c{text}\u201d"
    body = re.sub(r"^(you|i)\s+", "", text, flags=re.IGNORECASE)
    body = body[:1].lower() + body[1:] if body[:2] != body[:2].upper() else body
    if body and body[-1] not in '.!?\u2026"\u201d':
        body += "."
    return f"You {body}"


# -- continue ------------------------------------------------------------------------------------


def narrator_continue(*, draft: NarratorDraft) -> NarratorAlternative:
    """Add (and choose) a pending alternative that extends the chosen one; the chosen one is kept."""
    with transaction.atomic():
        locked = NarratorDraft.objects.select_for_update().get(pk=draft.pk)
        if locked.status != DraftStatus.OPEN:
            raise PlayError(f"This draft was {locked.get_status_display().lower()}; start a new narration.")
        base = locked.alternatives.filter(number=locked.chosen_number).first()
        if base is None or not (base.acceptable or base.stopped_with_text):
            raise PlayError("Only a narration with text can be continued: regenerate, or wait for it to end.")
        alternative = _continuation_add(
            locked, text=base.text, system_prompt=base.system_prompt, user_prompt=base.user_prompt, context=base.context
        )
    draft.chosen_number = locked.chosen_number
    return alternative


def _continuation_add(
    draft: NarratorDraft, *, text: str, system_prompt: str, user_prompt: str, context
) -> NarratorAlternative:
    """Add (and choose) a pending alternative that extends `text` with the prompt (and its memory
    context record) of the narration it continues: the stream asks with that prompt again."""
    from studio.saves.narrator.services import narrator_alternative_add

    return narrator_alternative_add(
        draft=draft,
        prefix=text.strip(),
        system_prompt=system_prompt or "",
        user_prompt=user_prompt or "",
        context=context or {},
    )


# -- undo, retry, swipes of the last turn --------------------------------------------------------


def _rewind_one(locked: Save, expected_turn: int):
    from studio.saves.checkpoints import CheckpointManager

    if locked.current_turn < 1:
        raise PlayError("There is no turn to undo yet.")
    return CheckpointManager().rewind(locked, locked.current_turn - 1, expected_current_turn=expected_turn)


def _turn_alternatives(locked: Save, event) -> tuple[list[dict], int]:
    """The alternatives the turn's accepted draft kept (field values) and which one is its text.

    The turn's own text is an alternative too ("as the turn was", first) when it is none of
    them: written by hand, or edited before accepting or afterwards.
    """
    accepted = (
        NarratorDraft.objects.filter(game_save=locked, turn_id=event.turn_id, status=DraftStatus.ACCEPTED)
        .order_by("-id")
        .first()
    )
    kept = list(accepted.alternatives.order_by("number").values(*KEPT_FIELDS)) if accepted is not None else []
    for values in kept:  # one never finished (accepted while another streamed) is not resumed
        if values["status"] in (AlternativeStatus.PENDING, AlternativeStatus.STREAMING):
            values.update(status=AlternativeStatus.CANCELLED, error="Not finished before the turn was accepted.")
    texts = [k["text"].strip() for k in kept]
    if event.narrative.strip() not in texts:
        kept.insert(0, {"status": AlternativeStatus.DONE, "text": event.narrative, "model": HAND_SOURCE})
        return kept, 1
    return kept, texts.index(event.narrative.strip()) + 1


KEPT_FIELDS = (
    "status",
    "text",
    "error",
    "model",
    "finish_reason",
    "latency_ms",
    "prompt_tokens",
    "completion_tokens",
    "system_prompt",
    "user_prompt",
    "context",
    "prefix",
    "first_token_ms",
    "play_settings",
)


def _draft_of(locked: Save, event, *, kept: list[dict], chosen: int, status: str = DraftStatus.OPEN) -> NarratorDraft:
    """Create the draft of `event`'s turn holding `kept` alternatives (call after the rewind that removed it)."""
    NarratorDraft.objects.filter(game_save=locked, status=DraftStatus.OPEN).update(status=DraftStatus.DISCARDED)
    draft = NarratorDraft.objects.create(
        game_save=locked, turn_id=event.turn_id, player_input=event.player_input, chosen_number=chosen, status=status
    )
    NarratorAlternative.objects.bulk_create(
        [NarratorAlternative(draft=draft, number=n, **values) for n, values in enumerate(kept, start=1)]
    )
    return draft


def last_turn_undo(*, game_save: Save, expected_turn: int) -> tuple[str, object]:
    """Rewind the save by one turn; return the undone turn's player action and the rewind's result.

    The undone turn is kept as an `undone` draft with its alternatives (its text chosen): it
    can be put back until the next turn is accepted (`draft_restore`). Raise TurnConflict
    (nothing changed) when the save is no longer at `expected_turn`.
    """
    from studio.saves.services import finish_pending_vector_rollback

    finish_pending_vector_rollback(game_save=game_save)
    with transaction.atomic():
        locked = Save.objects.select_for_update().get(pk=game_save.pk)
        event = locked.events.filter(turn_id=locked.current_turn).first()
        player_input = event.player_input if event is not None else ""
        kept, chosen = _turn_alternatives(locked, event) if event is not None else ([], 1)
        result = _rewind_one(locked, expected_turn)
        if event is not None:
            _draft_of(locked, event, kept=kept, chosen=chosen, status=DraftStatus.UNDONE)
    game_save.refresh_from_db()
    return player_input, result


def set_aside_drafts(*, game_save: Save, limit: int = 3) -> list[NarratorDraft]:
    """Return the drafts that can still be put back (discarded or undone, for the next turn), newest first."""
    return list(
        NarratorDraft.objects.filter(
            game_save=game_save,
            turn_id=game_save.current_turn + 1,
            status__in=(DraftStatus.DISCARDED, DraftStatus.UNDONE),
        )
        .prefetch_related("alternatives")
        .order_by("-id")[:limit]
    )


def draft_restore(*, game_save: Save, draft_id: int) -> NarratorDraft:
    """Reopen a discarded or undone draft of the save's next turn (the open one, if any, is set aside).

    Raise PlayError when it is not set aside, or when its turn is no longer the next one (a
    turn was accepted since: what it held can no longer be put back).
    """
    with transaction.atomic():
        locked = Save.objects.select_for_update().get(pk=game_save.pk)
        draft = NarratorDraft.objects.select_for_update().filter(pk=draft_id, game_save=locked).first()
        if draft is None or draft.status not in (DraftStatus.DISCARDED, DraftStatus.UNDONE):
            raise PlayError("That draft is not set aside (it is open, accepted, or gone).")
        if draft.turn_id != locked.current_turn + 1:
            raise PlayError(
                f"Turn {draft.turn_id} was accepted since (the save is at turn {locked.current_turn}); "
                "what was set aside for it can no longer be put back."
            )
        NarratorDraft.objects.filter(game_save=locked, status=DraftStatus.OPEN).update(status=DraftStatus.DISCARDED)
        NarratorDraft.objects.filter(pk=draft.pk).update(status=DraftStatus.OPEN)
        draft.status = DraftStatus.OPEN
    return draft


@dataclass
class Swipes:
    """The swipe arrows of the last turn: how many complete alternatives, which one is its text."""

    count: int
    position: int | None  # 1-based among the complete ones; None: the text is none of them (edited)
    numbers: list[int]  # the alternatives' numbers, in order

    @property
    def arrows(self) -> list[tuple[str, int | None, str]]:
        """(direction, the alternative's number or None at an end, glyph), as `saves/_swipe_arrows.html` draws them."""
        return [("previous", self.previous, "←"), ("next", self.next, "→")]

    @property
    def count_text(self) -> str:
        return f"{self.position}/{self.count}" if self.position else f"edited · {self.count} alternatives"

    @property
    def previous(self) -> int | None:
        if self.position is None:
            return self.numbers[-1] if self.numbers else None
        return self.numbers[self.position - 2] if self.position > 1 else None

    @property
    def next(self) -> int | None:
        if self.position is None:
            return self.numbers[0] if self.numbers else None
        return self.numbers[self.position] if self.position < self.count else None


def last_turn_swipes(*, game_save: Save, event=None) -> Swipes | None:
    """Return the last turn's swipes (None: no turn, or fewer than two alternatives to choose from)."""
    if game_save.current_turn < 1:
        return None
    if event is None:
        event = game_save.events.filter(turn_id=game_save.current_turn).first()
    draft = (
        NarratorDraft.objects.filter(game_save=game_save, turn_id=game_save.current_turn, status=DraftStatus.ACCEPTED)
        .order_by("-id")
        .first()
    )
    if event is None or draft is None:
        return None
    complete = [(a.number, a.text.strip()) for a in draft.alternatives.order_by("number") if a.acceptable]
    texts = [text for _, text in complete]
    position = texts.index(event.narrative.strip()) + 1 if event.narrative.strip() in texts else None
    if len(complete) < 2 and position is not None:
        return None
    return Swipes(count=len(complete), position=position, numbers=[n for n, _ in complete])


def last_turn_swipe(*, game_save: Save, expected_turn: int, number: int):
    """Make alternative `number` the last turn's text, in place (the turn stays); return the Event.

    Raise TurnConflict when the save is no longer at `expected_turn`, PlayError when the
    turn has no such complete alternative.
    """
    from studio.saves.errors import TurnConflict
    from studio.saves.narrator.services import narrator_alternative_add
    from studio.saves.narrator.snapshots import snapshot_choose
    from studio.saves.services import turn_update_narrative

    with transaction.atomic():
        locked = Save.objects.select_for_update().get(pk=game_save.pk)
        if locked.current_turn != expected_turn:
            raise TurnConflict(
                f"Save {locked.save_id} is at turn {locked.current_turn}, not {expected_turn}.",
                save_id=locked.save_id,
                current_turn=locked.current_turn,
            )
        event = locked.events.filter(turn_id=locked.current_turn).first()
        draft = (
            NarratorDraft.objects.select_for_update()
            .filter(game_save=locked, turn_id=locked.current_turn, status=DraftStatus.ACCEPTED)
            .order_by("-id")
            .first()
        )
        target = draft.alternatives.filter(number=number).first() if draft is not None and event is not None else None
        if target is None or not target.acceptable:
            raise PlayError(f"Turn {expected_turn} has no complete alternative {number} to swipe to.")
        if event.narrative.strip() not in {a.text.strip() for a in draft.alternatives.all()}:
            # The turn's text was edited: kept as an alternative before it is replaced.
            narrator_alternative_add(
                draft=draft, status=AlternativeStatus.DONE, text=event.narrative, model=HAND_SOURCE
            )
        NarratorDraft.objects.filter(pk=draft.pk).update(chosen_number=number)
        # What the narrator saw at this turn is now what it read for the chosen alternative.
        snapshot_choose(
            game_save=locked,
            turn_id=event.turn_id,
            alternative=target,
            alternatives=draft.alternatives.count(),
            by_hand=target.model == HAND_SOURCE,
        )
        return turn_update_narrative(game_save=locked, turn_id=event.turn_id, narrative=target.text, edited=False)


def last_turn_reopen(*, game_save: Save, expected_turn: int, then: str = "") -> NarratorDraft:
    """Make the last turn a draft again (a rewind by one); its alternatives are kept.

    `then`: "" (choose among the kept ones), "retry" (a new alternative to stream) or
    "continue" (one that extends the turn's text). Raise TurnConflict when the save is no
    longer at `expected_turn`, PlayError when it has no turn.
    """
    from studio.saves.services import finish_pending_vector_rollback

    finish_pending_vector_rollback(game_save=game_save)
    with transaction.atomic():
        locked = Save.objects.select_for_update().get(pk=game_save.pk)
        turn_id = locked.current_turn
        event = locked.events.filter(turn_id=turn_id).first()
        if event is None:
            raise PlayError("There is no turn to retry yet.")
        kept, chosen = _turn_alternatives(locked, event)
        _rewind_one(locked, expected_turn)
        draft = _draft_of(locked, event, kept=kept, chosen=chosen)
        if then == "retry":
            from studio.saves.narrator.services import narrator_alternative_add

            narrator_alternative_add(draft=draft)
        elif then == "continue":
            base = kept[chosen - 1]
            _continuation_add(
                draft,
                text=base["text"],
                system_prompt=base.get("system_prompt", ""),
                user_prompt=base.get("user_prompt", ""),
                context=base.get("context"),
            )
    game_save.refresh_from_db()
    return draft


# -- for the API: the same controls, nothing kept but what they append ---------------------------


@dataclass
class Continuation:
    addition: str
    narrative: str
    response: object


def continue_once(*, game_save: Save, narrative: str | None = None) -> Continuation:
    """Return the model's continuation of `narrative` (default: the last turn's); store nothing.

    The prompt is the narrator's for the last turn's action (the memory as it is now) with the
    text to extend. Raise PlayError without a turn, `limits.Refused` for a narrative a turn could
    not hold, NoModelConnected / SpendLimitExceeded / LLMError as `narrate_once` does.
    """
    from studio.saves.narrator.prompt import build_narrator_prompt
    from studio.saves.narrator.sampler import resolve_sampler
    from studio.saves.narrator.services import NO_MODEL, NoModelConnected

    event = game_save.events.filter(turn_id=game_save.current_turn).first()
    if narrative is None:
        if event is None:
            raise PlayError("There is no turn to continue yet; give the narrative to continue.")
        narrative = event.narrative
    limits.TURN_NARRATIVE.check(narrative)  # a turn's narrative: a turn's limit (limits.Refused)
    if not narrative.strip():
        raise PlayError("The narrative to continue is empty.")
    backend = get_llm_backend()
    if backend is None:
        raise NoModelConnected(NO_MODEL)
    prompt = build_narrator_prompt(game_save=game_save, player_input=event.player_input if event else "")
    user = continue_prompt(prompt.user, prefix=narrative, turn_id=max(1, game_save.current_turn))
    response = TrackedLLM(backend, game_save_id=game_save.pk).chat(
        system=prompt.system,
        prompt=user,
        operation="narrate",
        **resolve_sampler(game_save=game_save, meta=prompt.meta).request_options(),
    )
    addition = response.text.strip()
    return Continuation(addition=addition, narrative=join_continuation(narrative, addition), response=response)

"""Writes of the narrator: drafts, streamed alternatives, choose, discard, accept.

- `narrator_draft_create` stores the player's action for the next turn and its first
  alternative (pending). Nothing is generated yet: the page streams it next.
- `narration_stream(alternative_id=...)` claims a pending alternative (so a reloaded page or
  a second tab never streams it twice), builds the prompt, and yields the narrative's text
  deltas from the LLM (`TrackedLLM.stream`: the per-save spend guard and the LLMCall log of
  the living jobs, operation "narrate"). When the stream ends the alternative is `done`
  with the model, latency, tokens and the prompt and memory context it was built from. A
  stream that breaks marks it `failed`; a reader that goes away (the generator is closed,
  as Django does when the client disconnects) or a Stop (`narration_stop`) marks it
  `cancelled`. Either way nothing is appended. A watcher thread (`llm.abort_when`) looks for
  the Stop every `STOP_CHECK_SECONDS` while the model's request is open and ends that
  request at once, before its first word as well (`llm.StreamAbort`).
- `narrator_accept` appends the chosen (possibly edited) text through `turn_append` with the
  draft's turn as the expected turn, and writes the turn's `NarratorSnapshot` and the
  narration's two memory queries (`RecordedQuery`, source "narrator", for Lore replay) in
  the same transaction; the turn's memory jobs are queued on commit as for any append.
- `narrate_once` (the API) builds the prompt and asks for the whole answer, storing no draft.
- Every narration is sent with the save's sampler settings (`sampler.resolve_sampler`) and
  its prompt holds the save's author's note (`authors_note`); the alternative and the
  accepted turn's snapshot keep both (`play_settings`).
- A stream stopped (or broken) after some text leaves that text on the alternative: it is
  accepted only as an edited narrative (the form's text), never by itself.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass

from django.db import transaction
from django.db.models import Max
from django.utils import timezone

from studio import limits
from studio.memory.llm import (
    LLMCancelled,
    LLMError,
    LLMResponse,
    SpendLimitExceeded,
    TrackedLLM,
    abort_when,
    get_llm_backend,
)
from studio.memory.recall.search import record_context_queries
from studio.saves.errors import TurnConflict
from studio.saves.models import AlternativeStatus, DraftStatus, NarratorAlternative, NarratorDraft
from studio.world.models import Event, Save
from studio.saves.narrator import guard
from studio.saves.narrator.authors_note import note_of
from studio.saves.narrator.continuation import continue_prompt, join_continuation
from studio.saves.narrator.prompt import CONFIG, NarratorPrompt, build_narrator_prompt
from studio.saves.narrator.sampler import resolve_sampler
from studio.saves.narrator.snapshots import snapshot_create

logger = logging.getLogger(__name__)

NO_MODEL = "No language model is connected: set AXIOM_LLM_BASE_URL (see the notice on this page)."


class NarratorError(Exception):
    """A narrator action that cannot be done as asked (nothing was changed)."""


class NoModelConnected(NarratorError):
    """No LLM endpoint is configured."""


@dataclass
class Narration:
    """One proposal (the API's): the text, how it was made, and the prompt behind it."""

    text: str
    response: LLMResponse
    prompt: NarratorPrompt
    continuity: dict | None = None  # what the continuity guard found (`guard.narration_continuity`); None: off


def open_draft(*, game_save: Save) -> NarratorDraft | None:
    """Return the save's open draft for its next turn, or None."""
    return (
        NarratorDraft.objects.filter(game_save=game_save, status=DraftStatus.OPEN, turn_id=game_save.current_turn + 1)
        .prefetch_related("alternatives")
        .order_by("-id")
        .first()
    )


def narrator_draft_create(*, game_save: Save, player_input: str) -> NarratorDraft:
    """Open a draft for the save's next turn with one pending alternative; close older drafts."""
    player_input = (player_input or "").strip()[: CONFIG.max_input_chars]
    with transaction.atomic():
        locked = Save.objects.select_for_update().get(pk=game_save.pk)
        NarratorDraft.objects.filter(game_save=locked, status=DraftStatus.OPEN).update(status=DraftStatus.DISCARDED)
        draft = NarratorDraft.objects.create(
            game_save=locked, turn_id=locked.current_turn + 1, player_input=player_input
        )
        NarratorAlternative.objects.create(draft=draft, number=1)
    return draft


def narrator_alternative_add(*, draft: NarratorDraft, **fields) -> NarratorAlternative:
    """Add the draft's next alternative (numbered after the last) with `fields` and choose it.

    The one numbering rule of Regenerate, Continue and the memory proxy's proposals; call it
    in a transaction that holds the draft (or its save) locked, so two adds never share a number.
    """
    number = (draft.alternatives.aggregate(n=Max("number"))["n"] or 0) + 1
    alternative = NarratorAlternative.objects.create(draft=draft, number=number, **fields)
    NarratorDraft.objects.filter(pk=draft.pk).update(chosen_number=number)
    draft.chosen_number = number
    return alternative


def narrator_regenerate(*, draft: NarratorDraft) -> NarratorAlternative:
    """Add a pending alternative to an open draft and choose it; the earlier ones are kept."""
    with transaction.atomic():
        locked = NarratorDraft.objects.select_for_update().get(pk=draft.pk)
        if locked.status != DraftStatus.OPEN:
            raise NarratorError(f"This draft was {locked.get_status_display().lower()}; start a new narration.")
        alternative = narrator_alternative_add(draft=locked)
    draft.chosen_number = locked.chosen_number
    return alternative


def narrator_choose(*, draft: NarratorDraft, number: int) -> NarratorDraft:
    """Choose alternative `number` of an open draft."""
    if draft.status != DraftStatus.OPEN:
        raise NarratorError("This draft is closed.")
    if not draft.alternatives.filter(number=number).exists():
        raise NarratorError(f"This draft has no alternative {number}.")
    NarratorDraft.objects.filter(pk=draft.pk).update(chosen_number=number)
    draft.chosen_number = number
    return draft


def narrator_discard(*, draft: NarratorDraft) -> None:
    """Close a draft without appending anything."""
    NarratorDraft.objects.filter(pk=draft.pk, status=DraftStatus.OPEN).update(status=DraftStatus.DISCARDED)
    draft.status = DraftStatus.DISCARDED


def _claim(alternative_id: int) -> bool:
    return bool(
        NarratorAlternative.objects.filter(
            pk=alternative_id, status=AlternativeStatus.PENDING, draft__status=DraftStatus.OPEN
        ).update(status=AlternativeStatus.STREAMING)
    )


def answer_values(response: LLMResponse) -> dict:
    """The NarratorAlternative fields a model's answer fills: its model, why it stopped, timing, usage.

    The one mapping of the console's streams (`_finish`) and the memory proxy's relays
    (`proxy.services.proposal_finish`); the text is the caller's (a Stop keeps what was shown).
    """
    return {
        "model": (response.model or "")[:200],
        "finish_reason": (response.finish_reason or "")[:40],
        "latency_ms": max(0, int(response.latency_ms or 0)),
        "prompt_tokens": max(0, int(response.prompt_tokens or 0)),
        "completion_tokens": max(0, int(response.completion_tokens or 0)),
        "first_token_ms": response.first_token_ms,
    }


def _finish(
    alternative_id: int,
    status: str,
    *,
    text: str = "",
    error: str = "",
    response=None,
    prompt=None,
    settings: dict | None = None,
) -> None:
    """Record how a stream ended. A Stop (the row already cancelled) keeps the stopped text and
    message the player saw; only the usage and the prompt are added."""
    values = {"status": status, "text": text, "error": error[:2000]}
    rows = NarratorAlternative.objects.filter(pk=alternative_id)
    if rows.filter(status=AlternativeStatus.CANCELLED).exists():
        values = {}
    if response is not None:
        values.update(answer_values(response))
    if prompt is not None:
        context = prompt.context_record() if prompt.memory is not None else getattr(prompt, "stored_context", {})
        values.update(system_prompt=prompt.system, user_prompt=prompt.user, context=context)
    if settings is not None:
        values["play_settings"] = settings
    rows.update(**values)


STOP_CHECK_SECONDS = 0.5  # how often a stream looks for a Stop (one small read)
STOPPED = "Stopped before the end; nothing was appended. Edit the text and accept it, continue it, or regenerate."


def narration_stop(*, alternative: NarratorAlternative, shown_text: str = "") -> bool:
    """Stop a pending or streaming alternative: it becomes `cancelled` with the text the player saw.

    The stream's watcher notices within `STOP_CHECK_SECONDS`, even before the model's first
    word (a CPU server may read the prompt for half a minute) or in a stall, and ends the
    model's request; the stream then adds the usage. The text shown is kept up to a turn's
    narrative limit (studio/limits.py), without NUL. Return False when the alternative had
    already ended.
    """
    text = (alternative.prefix + " " if alternative.prefix else "") + (shown_text or "").strip()
    # Kept up to what a turn may hold (the text is accepted as a turn's narrative, once edited).
    text = text.replace(limits.NUL, "")[: limits.TURN_NARRATIVE.max_chars]
    return bool(
        NarratorAlternative.objects.filter(
            pk=alternative.pk, status__in=(AlternativeStatus.PENDING, AlternativeStatus.STREAMING)
        ).update(status=AlternativeStatus.CANCELLED, text=text.strip(), error=STOPPED)
    )


def _stopped(alternative_id: int) -> bool:
    return NarratorAlternative.objects.filter(pk=alternative_id, status=AlternativeStatus.CANCELLED).exists()


def play_settings_record(*, game_save: Save, sampler) -> dict:
    """Return what a narration keeps of the save's play settings: the author's note and the sampler."""
    note, depth = note_of(game_save)
    return {"authors_note": note, "authors_note_depth": depth, "sampler": sampler.as_record()}


def _prompt_for(alternative: NarratorAlternative, *, vector_memory=None) -> NarratorPrompt:
    """The prompt of a pending alternative: built now, or (Continue) the base's with the text to extend."""
    draft = alternative.draft
    if alternative.prefix and alternative.system_prompt:
        prompt = NarratorPrompt(
            system=alternative.system_prompt,
            user=alternative.user_prompt,
            turn_id=draft.turn_id,
            template_is_default=False,
            memory=None,
        )
    else:
        prompt = build_narrator_prompt(
            game_save=draft.game_save, player_input=draft.player_input, vector_memory=vector_memory
        )
        # A regenerated alternative avoids the findings it was regenerated for (saves/narrator/guard.py).
        prompt.user = guard.with_instructions(prompt.user, draft=draft, number=alternative.number)
    if alternative.prefix:
        prompt.user = continue_prompt(prompt.user, prefix=alternative.prefix, turn_id=draft.turn_id)
        if prompt.memory is None:
            prompt.stored_context = alternative.context or {}
    return prompt


def narration_stream(*, alternative_id: int, vector_memory=None) -> Iterator[str]:
    """Yield the narrative of a pending alternative as it streams; record how it ended.

    Yields nothing when the alternative is not pending (already streamed, or its draft was
    closed). Never raises an LLM error: a failure is recorded on the alternative. A
    Continue alternative yields only what the model adds; its stored text is the whole.
    """
    if not _claim(alternative_id):
        return
    # The save's play settings come in this query: the prompt, the sampler and the record share the row.
    alternative = NarratorAlternative.objects.select_related(
        "draft__game_save__universe", "draft__game_save__play_settings"
    ).get(pk=alternative_id)
    draft = alternative.draft
    game_save = draft.game_save
    backend = get_llm_backend()
    if backend is None:
        _finish(alternative_id, AlternativeStatus.FAILED, error=NO_MODEL)
        return
    try:
        prompt = _prompt_for(alternative, vector_memory=vector_memory)
        sampler = resolve_sampler(game_save=game_save, meta=prompt.meta)  # the meta the prompt read (None: read it)
        settings = play_settings_record(game_save=game_save, sampler=sampler)
    except Exception as exc:  # noqa: BLE001 - the alternative must never stay "streaming"
        logger.exception("narrator prompt for alternative %s failed", alternative_id)
        _finish(
            alternative_id,
            AlternativeStatus.FAILED,
            error=f"The prompt could not be built: {exc.__class__.__name__}: {exc}",
        )
        return
    prefix = alternative.prefix

    def whole(text: str) -> str:
        return join_continuation(prefix, text) if prefix else text

    tracked = TrackedLLM(backend, game_save_id=game_save.pk)
    # The watcher ends the model's request at a Stop even while nothing arrives (a CPU server
    # reading the prompt, a stall); the check between deltas stays, the watcher's thread
    # cannot see a Stop that this thread's open transaction holds.
    with abort_when(lambda: _stopped(alternative_id), every=STOP_CHECK_SECONDS) as abort:
        try:
            stream = tracked.stream(
                system=prompt.system, prompt=prompt.user, operation="narrate", abort=abort, **sampler.request_options()
            )
        except LLMCancelled:
            _finish(
                alternative_id,
                AlternativeStatus.CANCELLED,
                error=STOPPED,
                prompt=prompt,
                settings=settings,
                text=prefix,
            )
            return
        except SpendLimitExceeded as exc:
            _finish(
                alternative_id,
                AlternativeStatus.FAILED,
                error=f"Paused by the {exc.reason}",
                prompt=prompt,
                settings=settings,
                text=prefix,
            )
            return
        except LLMError as exc:
            _finish(
                alternative_id,
                AlternativeStatus.FAILED,
                error=f"The model could not be reached: {exc}",
                prompt=prompt,
                settings=settings,
                text=prefix,
            )
            return
        ended = False
        checked = time.monotonic()
        try:
            for delta in stream:
                if time.monotonic() - checked >= STOP_CHECK_SECONDS:
                    checked = time.monotonic()
                    if _stopped(alternative_id):
                        return  # the finally block closes the model's stream and adds the usage
                yield delta
            if stream.cancelled:
                return  # the watcher aborted the model's request at a Stop: recorded as below
            ended = True
        except LLMError as exc:
            ended = True
            _finish(
                alternative_id,
                AlternativeStatus.FAILED,
                text=whole(stream.text),
                error=f"The narration broke off ({exc}); nothing was appended. Edit it, continue it or regenerate.",
                response=stream.response,
                prompt=prompt,
                settings=settings,
            )
            return
        finally:
            if not ended:
                # The reader went away mid-narration (GeneratorExit) or a Stop: close the model's stream.
                stream.close()
                _finish(
                    alternative_id,
                    AlternativeStatus.CANCELLED,
                    text=whole(stream.text),
                    error=STOPPED,
                    response=stream.response,
                    prompt=prompt,
                    settings=settings,
                )
    response = stream.response
    status = AlternativeStatus.DONE if response.text.strip() else AlternativeStatus.FAILED
    error = "" if response.text.strip() else "The model answered with no text."
    if response.truncated:
        error = (
            f"Cut at the token limit ({response.max_tokens} tokens): raise Max tokens in the play settings "
            "(or AXIOM_LLM_MAX_TOKENS_NARRATE), continue it, or edit before accepting."
        )
    _finish(
        alternative_id,
        status,
        text=whole(response.text.strip()),
        error=error,
        response=response,
        prompt=prompt,
        settings=settings,
    )
    if status == AlternativeStatus.DONE:
        # The continuity guard reads the finished narration (its findings show beside the draft; "regenerate once"
        # adds the next alternative, which the page streams next).
        finished = NarratorAlternative.objects.select_related("draft__game_save").get(pk=alternative_id)
        check = guard.check_alternative(alternative=finished, meta=prompt.meta)
        if guard.wants_regeneration(alternative=finished, result=check, meta=prompt.meta):
            try:
                guard.regenerate_with_findings(
                    draft=finished.draft, number=finished.number, regenerate=narrator_regenerate
                )
            except NarratorError:
                pass  # the draft was closed meanwhile: the findings stay with it


def narration_run(*, alternative_id: int, vector_memory=None) -> NarratorAlternative:
    """Stream a pending alternative to its end (the page without JavaScript); return it. When the continuity
    guard regenerated it ("regenerate once"), the regenerated alternative is written too."""
    for _delta in narration_stream(alternative_id=alternative_id, vector_memory=vector_memory):
        pass
    alternative = NarratorAlternative.objects.select_related("draft").get(pk=alternative_id)
    follow = guard.regenerated_pending(alternative=alternative)
    if follow is not None:
        for _delta in narration_stream(alternative_id=follow.pk, vector_memory=vector_memory):
            pass
    return alternative


def narrate_once(*, game_save: Save, player_input: str, vector_memory=None, pov=None) -> Narration:
    """Return a proposed narrative for `player_input` as the next turn; store nothing but the call log.

    Raise NoModelConnected without an endpoint, SpendLimitExceeded over the save's budget,
    LLMError when the call fails.
    """
    backend = get_llm_backend()
    if backend is None:
        raise NoModelConnected(NO_MODEL)
    prompt = build_narrator_prompt(game_save=game_save, player_input=player_input, vector_memory=vector_memory, pov=pov)
    tracked = TrackedLLM(backend, game_save_id=game_save.pk)
    options = resolve_sampler(game_save=game_save, meta=prompt.meta).request_options()
    response = tracked.chat(system=prompt.system, prompt=prompt.user, operation="narrate", **options)
    narration = Narration(text=response.text.strip(), response=response, prompt=prompt)
    # The continuity guard: its findings come with the answer; "regenerate once" asks again with them as instructions.
    check = guard.check_narration(game_save=game_save, text=narration.text, player_input=player_input)
    first = None
    if check is not None and guard.settings_for(game_save).regenerates and guard.triggers_regeneration(check):
        notes = guard.instructions_text([f.instruction() for f in guard.triggers_regeneration(check)])
        prompt.user = f"{prompt.user}\n\n{notes}"
        first = {"narrative": narration.text, "findings": [f.as_dict() for f in check.findings]}
        response = tracked.chat(system=prompt.system, prompt=prompt.user, operation="narrate", **options)
        narration = Narration(text=response.text.strip(), response=response, prompt=prompt)
        check = guard.check_narration(game_save=game_save, text=narration.text, player_input=player_input)
    if check is not None:
        narration.continuity = {
            **check.as_dict(),
            "mode": guard.settings_for(game_save).mode,
            "regenerated_from": first,
        }
    return narration


def narrator_accept(*, draft: NarratorDraft, number: int | None = None, narrative: str | None = None):
    """Append the chosen alternative (or `narrative`, its edited text) as the draft's turn.

    Raise NarratorError when the draft is closed or the alternative is not complete, and
    TurnConflict (nothing written) when the save is no longer one turn short of the draft's.
    Return the appended Event.
    """
    from studio.saves.services import finish_pending_vector_rollback, turn_append

    number = number or draft.chosen_number
    alternative = draft.alternatives.filter(number=number).first()
    stopped = alternative is not None and alternative.stopped_with_text and narrative is not None
    if alternative is None or not (alternative.acceptable or stopped):
        raise NarratorError("Only a complete narration can be accepted: regenerate, or write the turn by hand.")
    text = (narrative if narrative is not None else alternative.text).strip()
    if not text:
        raise NarratorError("The narrative is empty; write something or discard the draft.")
    # Outside the transaction, as turn_append requires (the vector store is not the database).
    finish_pending_vector_rollback(game_save=draft.game_save)
    edited = text != alternative.text.strip()
    edited_check = guard.accept_check(draft=draft, text=text, edited=edited)  # before the turn is appended
    with transaction.atomic():
        locked = NarratorDraft.objects.select_for_update().filter(pk=draft.pk).first()
        if locked is None:  # a rewind (another tab, the memory proxy) took it away
            raise NarratorError("This draft is gone: the save was rewound meanwhile. Start a new narration.")
        if locked.status != DraftStatus.OPEN:
            raise NarratorError(f"This draft was already {locked.get_status_display().lower()}.")
        event = turn_append(
            game_save=draft.game_save, player_input=locked.player_input, narrative=text, expected_turn_id=locked.turn_id
        )
        if text != alternative.text.strip():  # edited before accepting: the turn carries the mark
            event.edited_at = timezone.now()
            Event.objects.filter(pk=event.pk).update(edited_at=event.edited_at)
        snapshot_create(  # the prompt as a delta of the save's previous snapshot (saves/narrator/snapshots.py)
            game_save_id=locked.game_save_id,
            turn_id=event.turn_id,
            player_input=locked.player_input,
            proposed=alternative.text,
            edited=text != alternative.text.strip(),
            alternatives=locked.alternatives.count(),
            model=alternative.model,
            finish_reason=alternative.finish_reason,
            latency_ms=alternative.latency_ms,
            prompt_tokens=alternative.prompt_tokens,
            completion_tokens=alternative.completion_tokens,
            system_prompt=alternative.system_prompt,
            user_prompt=alternative.user_prompt,
            context=alternative.context,
            play_settings=alternative.play_settings or {},
        )
        # The memory queries the narration was built with, for Lore replay: asked at the
        # turn before this one, as any next-turn context is.
        record_context_queries(
            game_save=draft.game_save,
            queries=(alternative.context or {}).get("queries"),
            source="narrator",
            turn_id=locked.turn_id - 1,
        )
        guard.accept_findings(draft=locked, number=number, edited_result=edited_check)
        NarratorDraft.objects.filter(pk=locked.pk).update(status=DraftStatus.ACCEPTED, chosen_number=number)
    draft.status = DraftStatus.ACCEPTED
    return event


__all__ = [
    "NO_MODEL",
    "Narration",
    "NarratorError",
    "NoModelConnected",
    "TurnConflict",
    "narrate_once",
    "narration_run",
    "narration_stop",
    "narration_stream",
    "narrator_accept",
    "narrator_alternative_add",
    "narrator_choose",
    "narrator_discard",
    "narrator_draft_create",
    "narrator_regenerate",
    "open_draft",
]

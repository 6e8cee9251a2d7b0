"""Reads of the narrator: the Console panel's state, snapshots, whether a model is connected."""

from __future__ import annotations

from django.conf import settings

from studio.memory.llm import spend_status
from studio.memory.turn_rows import turns_q
from studio.saves.models import NarratorSnapshot
from studio.world.models import Save
from studio.saves.narrator.snapshots import snapshot_prompt
from studio.saves.narrator.prefix import prefix_share, split_messages


def llm_connected() -> bool:
    """True when an LLM endpoint is configured (AXIOM_LLM_BASE_URL)."""
    return bool(getattr(settings, "AXIOM_LLM_BASE_URL", ""))


def spend_pause_note(*, game_save: Save) -> str:
    """Return why the save's LLM calls are paused by the spend guard, or ""."""
    if settings.AXIOM_LLM_CALLS_PER_HOUR <= 0 and settings.AXIOM_LLM_TOKENS_PER_HOUR <= 0:
        return ""
    status = spend_status(game_save_id=game_save.pk)
    if not status.exceeded:
        return ""
    return (
        f"This save is paused by the spend guard: {status.calls} LLM calls and {status.tokens} tokens in the "
        f"last hour (caps: {status.calls_cap or 'none'} calls, {status.tokens_cap or 'none'} tokens). The narrator "
        "and the memory jobs wait until the hour's use falls under the caps; you can still write turns by hand."
    )


def narrator_panel_context(*, game_save: Save, draft=None) -> dict:
    """Return what the Console's narrator panel shows: the open draft and its chosen alternative."""
    from studio.saves.narrator.services import open_draft

    if draft is None:
        draft = open_draft(game_save=game_save)
    alternatives = list(draft.alternatives.all()) if draft is not None else []
    chosen = next(
        (a for a in alternatives if a.number == draft.chosen_number), alternatives[-1] if alternatives else None
    )
    from studio.saves.narrator.authors_note import note_of
    from studio.saves.narrator.opening import opening_greetings
    from studio.saves.narrator.play import MODE_HELP, MODES, set_aside_drafts

    note, depth = note_of(game_save)
    return {
        "draft": draft,
        "alternatives": alternatives,
        "chosen": chosen,
        "llm_connected": llm_connected(),
        "spend_paused": spend_pause_note(game_save=game_save) if llm_connected() else "",
        "greetings": opening_greetings(game_save=game_save) if game_save.current_turn == 0 and draft is None else [],
        "last_alternatives": last_turn_alternatives(game_save=game_save),
        "input_modes": [(value, label, MODE_HELP[value]) for value, label in MODES],
        "authors_note": note,
        "authors_note_depth": depth,
        "set_aside": set_aside_drafts(game_save=game_save),
        "draft_swipes": _draft_swipes(alternatives, chosen),
        **_guard_context(game_save, draft, chosen),
    }


def _guard_context(game_save: Save, draft, chosen) -> dict:
    """The continuity guard's findings of the chosen alternative, and the findings it was asked to avoid."""
    from studio.memory.continuity.guard import settings_for
    from studio.memory.continuity.selectors import findings_for_proposal, instructions_for

    if draft is None or chosen is None:
        return {"findings": [], "guard_instructions": [], "guard_mode": ""}
    findings = findings_for_proposal(game_save=game_save, draft_id=draft.pk, alternative=chosen.number)
    return {
        "findings": findings,
        "findings_standing": [f for f in findings if f.counts],
        "guard_instructions": instructions_for(game_save=game_save, draft_id=draft.pk, alternative=chosen.number),
        "guard_mode": settings_for(game_save).mode,
    }


def _draft_swipes(alternatives, chosen) -> dict:
    """The draft's arrows (`saves/_swipe_arrows.html`): the chosen alternative's place, the numbers around it."""
    numbers = [a.number for a in alternatives]
    if chosen is None or chosen.number not in numbers:
        return {"arrows": [("previous", None, "←"), ("next", None, "→")], "count": ""}
    index = numbers.index(chosen.number)
    notes = [
        note
        for note, on in (
            ("continued", bool(chosen.prefix)),
            (chosen.get_status_display().lower(), chosen.status != "done"),
        )
        if on
    ]
    return {
        "arrows": [
            ("previous", numbers[index - 1] if index else None, "←"),
            ("next", numbers[index + 1] if index + 1 < len(numbers) else None, "→"),
        ],
        "count": f"{index + 1}/{len(numbers)}" + "".join(f" ({note})" for note in notes),
    }


def last_turn_alternatives(*, game_save: Save) -> int:
    """Return how many alternatives the last turn's narration had (0 when written by hand)."""
    from studio.saves.models import DraftStatus, NarratorAlternative

    if game_save.current_turn < 1:
        return 0
    return NarratorAlternative.objects.filter(
        draft__game_save=game_save, draft__turn_id=game_save.current_turn, draft__status=DraftStatus.ACCEPTED
    ).count()


def snapshot_turn_ids(*, game_save: Save, turn_ids) -> set[int]:
    """Return which of `turn_ids` have a narrator snapshot (one query, for a timeline page)."""
    return set(
        NarratorSnapshot.objects.filter(turns_q(turn_ids), game_save=game_save).values_list("turn_id", flat=True)
    )


def previous_snapshot_prompt(*, snapshot: NarratorSnapshot) -> NarratorSnapshot | None:
    """Return the snapshot of the nearest earlier turn with its whole prompt in `system_prompt` /
    `user_prompt` (rebuilt from its delta, `snapshots.snapshot_prompt`), or None.

    "Earlier" skips turns without a snapshot (written by hand, imported, from an API client):
    the last accepted narration's prompt before this one is what a model server's prefix
    cache may still hold.
    """
    previous = (
        NarratorSnapshot.objects.filter(game_save_id=snapshot.game_save_id, turn_id__lt=snapshot.turn_id)
        .order_by("-turn_id")
        .only("pk", "game_save_id", "turn_id", "system_prompt", "user_prompt", "prompt_delta")
        .first()
    )
    if previous is not None:
        previous.system_prompt, previous.user_prompt = snapshot_prompt(previous)
    return previous


def snapshot_prefix_context(*, snapshot: NarratorSnapshot) -> dict:
    """Return what the snapshot page shows of the prompt's beginning shared with the previous one.

    `previous` is the nearest earlier snapshot (None: nothing to compare with) and
    `previous_adjacent` whether it is the turn just before; `prefix` the `PrefixShare`, with
    its counts formatted for reading in `prefix_figures`; `system_split` / `user_split` the
    two messages cut where the shared part ends. `snapshot` holds its whole prompt afterwards
    (`snapshot_prompt`: the stored delta rebuilt), as the page shows it.
    """
    snapshot.system_prompt, snapshot.user_prompt = snapshot_prompt(snapshot)
    previous = previous_snapshot_prompt(snapshot=snapshot)
    if previous is None:
        return {"previous": None}
    share = prefix_share(
        system=snapshot.system_prompt,
        user=snapshot.user_prompt,
        previous_system=previous.system_prompt,
        previous_user=previous.user_prompt,
    )
    system, user = split_messages(
        system=snapshot.system_prompt, user=snapshot.user_prompt, shared_chars=share.shared_chars
    )
    return {
        "previous": previous,
        "previous_adjacent": previous.turn_id == snapshot.turn_id - 1,
        "prefix": share,
        "prefix_figures": {
            "shared": f"{share.shared_chars:,}",
            "total": f"{share.total_chars:,}",
            "new_tokens": f"{share.new_tokens:,}",
        },
        "system_split": system,
        "user_split": user,
    }

"""Reads of continuity findings: a proposal's (the Console's draft), a turn's (the turn page), a save's
standing findings for Lore health, and the instructions a regenerated alternative was asked to follow."""

from __future__ import annotations

from django.db.models import QuerySet

from studio.memory.continuity.findings import Finding, Item
from studio.memory.continuity.models import ContinuityFinding, FindingResolution, FindingVerdict

__all__ = ["findings_for_proposal", "findings_for_turn", "findings_standing", "instructions_for", "as_finding"]


def findings_for_proposal(*, game_save, draft_id: int, alternative: int) -> list[ContinuityFinding]:
    return list(
        ContinuityFinding.objects.filter(
            game_save_id=game_save.pk, draft_id=draft_id, alternative=alternative
        ).order_by("id")
    )


def findings_for_turn(*, game_save, turn_id: int) -> list[ContinuityFinding]:
    """Every finding made while the turn was proposed (every alternative), in the order they were found."""
    return list(
        ContinuityFinding.objects.filter(game_save_id=game_save.pk, turn_id=turn_id).order_by("alternative", "id")
    )


def findings_standing(*, game_save, limit: int = 200) -> QuerySet[ContinuityFinding]:
    """The findings the save's timeline holds: accepted anyway (in turns up to the current one), not rejected by
    the model; newest first."""
    return (
        ContinuityFinding.objects.filter(
            game_save_id=game_save.pk, turn_id__lte=game_save.current_turn, resolution=FindingResolution.ACCEPTED
        )
        .exclude(verdict=FindingVerdict.REJECTED)
        .order_by("-turn_id", "id")[:limit]
    )


def as_finding(row: ContinuityFinding) -> Finding:
    return Finding(
        kind=row.kind,
        sentence=row.sentence,
        character=row.character,
        item=Item(row.item_layer, row.item_ref or {}, row.item_text, row.item_turn),
        why=row.why,
        verdict=row.verdict,
        judge=row.judge,
    )


def instructions_for(*, game_save, draft_id: int, alternative: int) -> list[str]:
    """The findings a regenerated alternative was asked to avoid, as instructions (none: [])."""
    rows = (
        ContinuityFinding.objects.filter(game_save_id=game_save.pk, draft_id=draft_id, regenerated_as=alternative)
        .exclude(verdict=FindingVerdict.REJECTED)
        .order_by("id")
    )
    return [as_finding(row).instruction() for row in rows]


def findings_in_turns(game_save, *, first_turn: int, last_turn: int, kind: str | None = None) -> list[dict]:
    """The findings that stand in the story in turns `first_turn`..`last_turn` (accepted anyway, not rejected by the
    model; of `kind`, or every kind), as the memory tests' `no_findings` kind reads them
    (`saves.memory_tests.findings`)."""
    rows = (
        ContinuityFinding.objects.filter(
            game_save_id=game_save.pk,
            turn_id__gte=first_turn,
            turn_id__lte=min(last_turn, game_save.current_turn),
            resolution=FindingResolution.ACCEPTED,
        )
        .exclude(verdict=FindingVerdict.REJECTED)
        .order_by("turn_id", "id")
    )
    if kind:
        rows = rows.filter(kind=kind)
    return [
        {
            "kind": row.kind,
            "turn_id": row.turn_id,
            "sentence": row.sentence,
            "item": row.item_label,
            "why": row.why,
            "character": row.character,
        }
        for row in rows
    ]

"""Writes of continuity findings: record what a check found for a proposal, and what the playtester did.

- `findings_record` stores a check's findings for one proposal (a draft's alternative), replacing
  what an earlier check of the same proposal stored (a check run twice stores them once);
- `findings_resolve` marks a proposal's open findings with what became of them: regenerated with
  them as instructions (`regenerated_as` names the new alternative), accepted anyway, fixed by an
  edit, or left behind by another alternative's acceptance;
- `findings_at_accept` is the accept's one rule, run in the accept's transaction: the chosen
  proposal's standing findings are accepted anyway, or, when the text was edited, checked again
  on the edited text (what the edit removed is "fixed by an edit", what it left is accepted anyway),
  also when it had been regenerated and the playtester went back to it; the draft's other
  alternatives' open findings are superseded.
"""

from __future__ import annotations

from studio.memory.continuity.findings import CheckResult, Finding
from studio.memory.continuity.models import ContinuityFinding, FindingResolution

__all__ = ["findings_at_accept", "findings_record", "findings_resolve"]


def _row(game_save, finding: Finding, *, turn_id: int, draft_id: int | None, alternative: int) -> ContinuityFinding:
    item = finding.item
    return ContinuityFinding(
        game_save_id=game_save.pk,
        turn_id=turn_id,
        draft_id=draft_id,
        alternative=alternative,
        kind=finding.kind,
        verdict=finding.verdict,
        sentence=finding.sentence[:20_000],
        character=finding.character[:200],
        item_layer=item.layer,
        item_ref=item.ref,
        item_text=item.text[:20_000],
        item_turn=item.turn,
        why=finding.why[:20_000],
        judge=finding.judge[:20_000],
    )


def findings_record(
    *, game_save, result: CheckResult, draft_id: int | None, alternative: int = 1, turn_id: int | None = None
) -> list[ContinuityFinding]:
    """Store `result`'s findings for the proposal (`draft_id`, `alternative`) of turn `turn_id` (default the
    result's); an earlier record of the same proposal is replaced. Return the rows."""
    turn_id = result.turn_id if turn_id is None else turn_id
    ContinuityFinding.objects.filter(
        game_save_id=game_save.pk, turn_id=turn_id, draft_id=draft_id, alternative=alternative
    ).delete()
    rows = [_row(game_save, f, turn_id=turn_id, draft_id=draft_id, alternative=alternative) for f in result.findings]
    return ContinuityFinding.objects.bulk_create(rows)


def findings_resolve(
    *, game_save, draft_id: int, alternative: int, resolution: str, regenerated_as: int | None = None
) -> int:
    """Mark the proposal's open findings `resolution`; return how many."""
    updates = {"resolution": resolution}
    if regenerated_as is not None:
        updates["regenerated_as"] = regenerated_as
    return ContinuityFinding.objects.filter(
        game_save_id=game_save.pk, draft_id=draft_id, alternative=alternative, resolution=FindingResolution.OPEN
    ).update(**updates)


def findings_at_accept(*, game_save, draft_id: int, alternative: int, edited_result: CheckResult | None = None) -> None:
    """Record what accepting the proposal does to its findings (the module's rule); `edited_result`: the check
    of the edited text, when the playtester edited it."""
    rows = ContinuityFinding.objects.filter(game_save_id=game_save.pk, draft_id=draft_id)
    rows.exclude(alternative=alternative).filter(resolution=FindingResolution.OPEN).update(
        resolution=FindingResolution.SUPERSEDED
    )
    # The accepted proposal's findings, even those it was regenerated for: the playtester went back and took it.
    mine = list(
        rows.filter(alternative=alternative, resolution__in=(FindingResolution.OPEN, FindingResolution.REGENERATED))
    )
    if edited_result is None:
        ContinuityFinding.objects.filter(pk__in=[r.pk for r in mine]).update(resolution=FindingResolution.ACCEPTED)
        return
    remaining = {(f.kind, f.character, f.item.label()) for f in edited_result.findings}
    fixed, kept = [], []
    for row in mine:
        label = _label(row)
        (kept if (row.kind, row.character, label) in remaining else fixed).append(row.pk)
    ContinuityFinding.objects.filter(pk__in=fixed).update(resolution=FindingResolution.EDITED)
    ContinuityFinding.objects.filter(pk__in=kept).update(resolution=FindingResolution.ACCEPTED)
    known = {(r.kind, r.character, _label(r)) for r in mine}
    new = [f for f in edited_result.findings if (f.kind, f.character, f.item.label()) not in known]
    rows = [_row(game_save, f, turn_id=edited_result.turn_id, draft_id=draft_id, alternative=alternative) for f in new]
    for row in rows:
        row.resolution = FindingResolution.ACCEPTED
    ContinuityFinding.objects.bulk_create(rows)


def _label(row: ContinuityFinding) -> str:
    from studio.memory.continuity.findings import Item

    return Item(row.item_layer, row.item_ref or {}, row.item_text, row.item_turn).label()

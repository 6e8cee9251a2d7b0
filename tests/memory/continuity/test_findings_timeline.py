"""Properties: continuity findings are rows of their turn: a rewind to N leaves them as they stood at N, a fork at
N and a save file carry them exactly (their facts remapped to the copy's), and a draft's findings go with the draft.

Random play through the services play uses: each turn is proposed as one or two alternatives whose findings are
recorded (citing earlier facts, lore entries, turns), one is regenerated with its findings as instructions or
accepted anyway, the turn is appended, and sometimes a draft is left open for the next turn.
"""

from __future__ import annotations

import itertools

import pytest
from hypothesis import Phase, given, settings
from hypothesis import strategies as st

from studio.memory.continuity.findings import CheckResult, Finding, Item
from studio.memory.continuity.models import ContinuityFinding, FindingResolution
from studio.memory.continuity.services import findings_at_accept, findings_record, findings_resolve
from studio.memory.facts import Fact, insert_facts
from studio.memory.models import Fact as FactRow
from studio.saves import portable
from studio.saves.checkpoints import CheckpointManager
from studio.world.models import Save
from studio.saves.services import turn_append
from tests.fakes import FakeVectorMemory

pytestmark = pytest.mark.django_db

_ids = itertools.count()
FIELDS = (
    "turn_id",
    "alternative",
    "kind",
    "verdict",
    "resolution",
    "regenerated_as",
    "sentence",
    "character",
    "item_layer",
    "item_text",
    "item_turn",
    "why",
    "judge",
)


def snapshot(save: Save, turn: int) -> list:
    """The findings of the turns up to `turn`, facts named by their rank (a fork's and a file's have new ids)."""
    ranks = {
        pk: i
        for i, pk in enumerate(
            FactRow.objects.filter(game_save=save).order_by("turn_id", "id").values_list("pk", flat=True)
        )
    }
    rows = []
    for row in ContinuityFinding.objects.filter(game_save=save, turn_id__lte=turn):
        ref = dict(row.item_ref)
        if "fact_id" in ref:
            ref["fact_id"] = ranks.get(ref["fact_id"], "gone")
        rows.append((*(getattr(row, name) for name in FIELDS), sorted(ref.items())))
    return sorted(rows, key=repr)


def findings(data, save) -> CheckResult:
    facts = list(FactRow.objects.filter(game_save=save).values_list("pk", "turn_id", "statement"))
    result = CheckResult(turn_id=save.current_turn + 1)
    for _ in range(data.draw(st.integers(0, 2), label="findings")):
        kind = data.draw(st.sampled_from(["leak", "presence", "contradiction"]), label="kind")
        if facts and data.draw(st.booleans(), label="a fact?"):
            pk, turn, statement = data.draw(st.sampled_from(facts), label="fact")
            item = Item("fact", {"fact_id": pk}, statement, turn)
        else:
            item = Item("lore", {"entry_id": "ledger", "title": "The Ledger"}, "The ledger hides debts.", 0)
        verdict = "candidate" if kind == "contradiction" else "found"
        result.findings.append(
            Finding(
                kind=kind,
                sentence=f"sentence {next(_ids)}",
                character="Mira",
                item=item,
                why=f"why {next(_ids)}",
                verdict=verdict,
            )
        )
    return result


def propose_and_accept(data, save) -> None:
    draft_id = next(_ids) + 10_000
    findings_record(game_save=save, result=findings(data, save), draft_id=draft_id, alternative=1)
    number = 1
    if data.draw(st.booleans(), label="regenerate?"):
        findings_resolve(
            game_save=save, draft_id=draft_id, alternative=1, resolution=FindingResolution.REGENERATED, regenerated_as=2
        )
        findings_record(game_save=save, result=findings(data, save), draft_id=draft_id, alternative=2)
        number = 2
    findings_at_accept(game_save=save, draft_id=draft_id, alternative=number)
    event = turn_append(game_save=save, player_input="go", narrative="...", state={})
    insert_facts(save.save_id, event.turn_id, [Fact(f"fact {next(_ids)}") for _ in range(data.draw(st.integers(0, 2)))])
    save.refresh_from_db()


@settings(max_examples=20, phases=[Phase.explicit, Phase.reuse, Phase.generate])
@given(data=st.data())
def test_rewind_fork_and_save_file_keep_the_findings_as_they_stood(cast, no_runner, data):
    save = Save.objects.create(universe=cast, name="P", save_id=f"guard{next(_ids)}", memory_mode="living")
    turns = data.draw(st.integers(1, 5), label="turns")
    recorded = {0: snapshot(save, 0)}
    for _ in range(turns):
        propose_and_accept(data, save)
        recorded[save.current_turn] = snapshot(save, save.current_turn)
    # A draft left open for the next turn has findings too: they go with the draft.
    findings_record(game_save=save, result=findings(data, save), draft_id=1, alternative=1)
    n = data.draw(st.integers(0, turns), label="n")
    manager = CheckpointManager(vector_memory=FakeVectorMemory())
    fork = manager.fork(save, n)
    assert snapshot(fork, n) == recorded[n]
    assert not ContinuityFinding.objects.filter(game_save=fork, turn_id__gt=n).exists()
    exported = portable.save_export(game_save=save).read()
    imported = portable.save_import(universe=cast, data=exported).game_save
    assert snapshot(imported, turns) == recorded[turns]
    assert not ContinuityFinding.objects.filter(game_save=imported, turn_id__gt=turns).exists()  # the draft's stay
    preview = manager.preview(save, n)
    manager.rewind(save, n)
    save.refresh_from_db()
    assert snapshot(save, n) == recorded[n]
    if n < turns:  # nothing after N: the draft's findings went with the dropped turns
        assert not ContinuityFinding.objects.filter(game_save=save, turn_id__gt=n).exists()
        # the preview counts the accepted turns' findings a rewind drops, not the draft's
        assert preview.counts["continuity_findings"] == len(recorded[turns]) - len(recorded[n])

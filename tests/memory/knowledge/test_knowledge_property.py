"""Properties: rewinding to N gives the knowledge recorded at N; a fork at N continues identically.

Random play through `turn_append` (presence in the state or carried, scene changes), facts,
reveals of earlier facts and of secret lore entries, and playtester presence edits. The
snapshot is who knows what (every character against every fact, by creation rank, and every
secret entry, with the reason), the presence rows and the reveals.
"""

from __future__ import annotations

import itertools

import pytest
from hypothesis import Phase, given, settings
from hypothesis import strategies as st

from studio.memory.facts import Fact, insert_facts
from studio.memory.knowledge.models import Presence, Reveal
from studio.memory.knowledge.presence import presence_set
from studio.memory.knowledge.reveals import reveal_add
from studio.memory.knowledge.selectors import knowledge_at
from studio.memory.models import Fact as FactRow
from studio.saves.checkpoints import CheckpointManager
from studio.world.models import Save
from studio.saves.services import turn_append
from tests.fakes import FakeVectorMemory

pytestmark = pytest.mark.django_db

NAMES = ["Mira", "Kael", "Ivo", "Ash"]
_ids = itertools.count()


def snapshot(save: Save, turn: int) -> dict:
    ranks = {
        pk: i
        for i, pk in enumerate(
            FactRow.objects.filter(game_save=save).order_by("turn_id", "id").values_list("pk", flat=True)
        )
    }
    table = knowledge_at(save, turn=turn, characters=NAMES)
    return {
        "facts": sorted(
            (ranks[f["fact"].pk], f["fact"].statement, [(c.known, c.why) for c in f["cells"]]) for f in table.facts
        ),
        "secrets": [(s["entry_id"], s["note"], [(c.known, c.why) for c in s["cells"]]) for s in table.secrets],
        "presence": list(
            Presence.objects.filter(game_save=save)
            .order_by("turn_id")
            .values_list("turn_id", "characters", "source", "scene")
        ),
        "reveals": sorted(
            (r.turn_id, ranks.get(r.fact_id, -1), r.entry_id, r.character, r.told_by)
            for r in Reveal.objects.filter(game_save=save)
        ),
    }


def play(data, save):
    state = {}
    if data.draw(st.booleans(), label="present?"):
        state["present"] = data.draw(st.lists(st.sampled_from(NAMES), max_size=3, unique=True), label="present")
    if data.draw(st.integers(0, 3), label="scene?") == 0:
        state["location"] = data.draw(st.sampled_from(["harbour", "chapel", "tunnel"]), label="location")
    event = turn_append(game_save=save, player_input="go", narrative="...", state=state)
    turn = event.turn_id
    insert_facts(save.save_id, turn, [Fact(f"fact {next(_ids)}") for _ in range(data.draw(st.integers(0, 2)))])
    earlier = list(FactRow.objects.filter(game_save=save).values_list("pk", flat=True))
    for _ in range(data.draw(st.integers(0, 2), label="reveals")):
        who = data.draw(st.sampled_from(NAMES))
        if earlier and data.draw(st.booleans()):
            reveal_add(game_save=save, turn_id=turn, character=who, fact_id=data.draw(st.sampled_from(earlier)))
        else:
            reveal_add(
                game_save=save, turn_id=turn, character=who, entry_id=data.draw(st.sampled_from(["ledger", "tunnel"]))
            )
    # An edit of an earlier turn rewrites history (as a narrative edit does): a rewind keeps it.
    # So the playtester edits the turn just played, before its snapshot is taken.
    if data.draw(st.integers(0, 4), label="edit?") == 0:
        presence_set(
            game_save=save,
            turn_id=turn,
            characters=data.draw(st.lists(st.sampled_from(NAMES), max_size=2, unique=True)),
        )


@settings(
    max_examples=20, phases=[Phase.explicit, Phase.reuse, Phase.generate]
)  # each example plays turns: no slow shrink
@given(data=st.data())
def test_rewind_gives_the_knowledge_recorded_at_n_and_a_fork_continues_identically(cast, no_runner, data):
    save = Save.objects.create(universe=cast, name="P", save_id=f"prop{next(_ids)}", memory_mode="living")
    turns = data.draw(st.integers(1, 6), label="turns")
    recorded = {0: snapshot(save, 0)}
    for _ in range(turns):
        play(data, save)
        recorded[save.current_turn] = snapshot(save, save.current_turn)
    n = data.draw(st.integers(0, turns), label="n")
    manager = CheckpointManager(vector_memory=FakeVectorMemory())
    fork = manager.fork(save, n)
    assert snapshot(fork, n) == recorded[n]
    manager.rewind(save, n)
    save.refresh_from_db()
    assert snapshot(save, n) == recorded[n]
    # The same next turn on both gives the same knowledge.
    seed = data.draw(st.integers(0, 10**6), label="seed")
    for branch in (save, fork):
        branch.refresh_from_db()
        turn_append(
            game_save=branch,
            player_input="go",
            narrative="next",
            state={"present": [NAMES[seed % 4]]} if seed % 2 else {},
        )
        insert_facts(branch.save_id, branch.current_turn, [Fact("the same fact")])
    assert snapshot(save, n + 1) == snapshot(fork, n + 1)

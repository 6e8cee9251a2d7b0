"""Helpers shared by the checkpoint tests: play turns through the engine API, take snapshots, and
draw random turns (`draw_turn`, for the hypothesis properties of rewind and save files).

A snapshot is the whole memory state of a save with database ids replaced by creation rank
(facts and beliefs are created in turn order), so a rewound save, a fork and the state
recorded earlier compare equal when they hold the same content. Stale flags and
`updated_turn_id` are left out: the seed prescribes that a rewind flags and clamps them.
"""

from __future__ import annotations

import itertools

from hypothesis import strategies as st

from studio.memory.facts import Fact, insert_facts
from studio.memory.mental_models import upsert_mental_model
from studio.memory.models import Fact as FactRow
from studio.memory.models import MentalModel as MentalModelRow
from studio.memory.models import Observation as ObservationRow
from studio.memory.observations import apply_consolidation
from studio.world.models import Event, Save, StateCache


def play_turn(save: Save, *, facts=(), actions=(), refresh=(), vector=None, narrative=None) -> dict:
    """Append one turn: event, state, facts, consolidation, mental-model refreshes, chunk.

    `facts` is a list of (statement, entities); `actions` a list of dicts whose
    `source_fact_ids` may name this turn's new facts as ("new", i); `refresh` a list of
    (subject, summary, belief ids). Return {"turn", "fact_ids", "counts"}.
    """
    turn = save.current_turn + 1
    text = narrative or f"Turn {turn} of {save.save_id}."
    Event.objects.create(game_save=save, turn_id=turn, player_input=f"act {turn}", narrative=text)
    StateCache.objects.create(game_save=save, turn_id=turn, state={"turn": turn, "gold": turn * 3})
    objs = [Fact(statement, entities=list(entities)) for statement, entities in facts]
    new_ids = insert_facts(save.save_id, turn, objs)
    fact_turn_map = {i: turn for i in new_ids}
    resolved = []
    for action in actions:
        action = dict(action)
        action["source_fact_ids"] = [
            new_ids[ref[1]] if isinstance(ref, tuple) else ref for ref in action.get("source_fact_ids", [])
        ]
        resolved.append(action)
    counts = apply_consolidation(save.save_id, turn, resolved, fact_turn_map) if resolved else {}
    for subject, summary, sources in refresh:
        upsert_mental_model(save.save_id, subject, summary, turn, list(sources))
    save.current_turn = turn
    save.save(update_fields=["current_turn"])
    if vector is not None:
        vector.embed_chunk(save.save_id, turn, text)
    return {"turn": turn, "fact_ids": new_ids, "counts": counts}


def snapshot(save: Save) -> dict:
    pk = save.pk
    fact_rows = list(FactRow.objects.filter(game_save_id=pk).order_by("turn_id", "id"))
    fact_rank = {f.pk: i for i, f in enumerate(fact_rows)}
    belief_rows = list(ObservationRow.all_objects.filter(game_save_id=pk).order_by("id"))
    belief_rank = {b.pk: i for i, b in enumerate(belief_rows)}

    def sources(items):
        # A fact an edit deleted is still named in the trail: ranked after the stored ones, by its id.
        return sorted(
            ((0, fact_rank[s["fact_id"]]) if s["fact_id"] in fact_rank else (1, s["fact_id"]), s["turn_id"])
            for s in items or []
        )

    def trail(entries):
        return [
            (h.get("action"), h.get("turn_id"), h.get("statement"), h.get("subject"), sources(h.get("sources_added")))
            for h in entries or []
        ]

    return {
        "turn": Save.objects.get(pk=pk).current_turn,
        "events": list(
            Event.objects.filter(game_save_id=pk)
            .order_by("turn_id")
            .values_list("turn_id", "player_input", "narrative")
        ),
        "states": list(StateCache.objects.filter(game_save_id=pk).order_by("turn_id").values_list("turn_id", "state")),
        "facts": [
            (f.turn_id, f.statement, f.fact_type, f.who, f.what, f.when, f.where, f.why, f.entities, f.entity_index)
            for f in fact_rows
        ],
        "beliefs": [
            {
                "rank": belief_rank[b.pk],
                "statement": b.statement,
                "subject": b.subject,
                "subject_key": b.subject_key,
                "sources": sources(b.sources),
                "proof_count": b.proof_count,
                "last_source_turn": b.last_source_turn,
                "history": trail(b.history),
                "created_turn_id": b.created_turn_id,
                "held": b.deleted_turn_id is None,
            }
            for b in belief_rows
        ],
        "models": sorted(
            (
                m.subject,
                m.summary,
                [belief_rank.get(i, ("missing", i)) for i in m.sources],
                [
                    (v["turn_id"], v["summary"], [belief_rank.get(i, ("missing", i)) for i in v["sources"]])
                    for v in m.versions
                ],
                m.created_turn_id,
            )
            for m in MentalModelRow.objects.filter(game_save_id=pk)
        ),
    }


SUBJECTS = ["", "Kael", "Mira", "kael", "Ivo"]
_belief_counter = itertools.count()


def draw_turn(data, save, fact_counter):
    """Draw one turn's facts, actions and refreshes against the save's current beliefs."""
    n_facts = data.draw(st.integers(0, 3), label="facts")
    facts = []
    for _ in range(n_facts):
        i = next(fact_counter)
        facts.append((f"fact {i}", data.draw(st.lists(st.sampled_from(SUBJECTS[1:]), max_size=2), label="entities")))
    held = list(ObservationRow.objects.filter(game_save=save).order_by("id").values_list("id", flat=True))
    old_facts = list(save.facts.order_by("id").values_list("id", flat=True))
    actions = []
    for _ in range(data.draw(st.integers(0, 3), label="actions")):
        kind = data.draw(st.sampled_from(["CREATE", "UPDATE", "DELETE"]) if held else st.just("CREATE"))
        refs = []
        if facts:
            refs += [("new", j) for j in data.draw(st.sets(st.integers(0, len(facts) - 1), max_size=2))]
        if old_facts:
            refs += data.draw(st.lists(st.sampled_from(old_facts), max_size=2))
        statement = f"belief {next(_belief_counter)}"
        subject = data.draw(st.sampled_from(SUBJECTS))
        if kind == "CREATE":
            actions.append({"kind": kind, "statement": statement, "subject": subject, "source_fact_ids": refs})
        elif kind == "UPDATE":
            actions.append(
                {
                    "kind": kind,
                    "statement": statement,
                    "subject": subject,
                    "observation_id": data.draw(st.sampled_from(held)),
                    "source_fact_ids": refs,
                }
            )
        else:
            actions.append({"kind": kind, "observation_id": data.draw(st.sampled_from(held))})
    refresh = []
    for subject in data.draw(st.lists(st.sampled_from(SUBJECTS), max_size=2, unique=True), label="refresh"):
        sources = data.draw(st.lists(st.sampled_from(held), max_size=3)) if held else []
        refresh.append((subject, f"model {next(_belief_counter)}", sources))
    return {"facts": facts, "actions": actions, "refresh": refresh}

"""Beliefs held by a character, and the refusal of beliefs that restate a mission.

**Holder and subject.** The engine contract's belief has one `subject` ("the entity it is
about / who holds it"). The studio keeps `subject` as what the belief is about and adds
`holder` (a column outside the contract): "" for the world's belief, a character's name for
a belief that character holds. The rule that tells a holder from the subject, applied to
every belief the living pipeline creates or UPDATEs at turn N (`assign_holders`):

    the belief is held by its subject when the subject is a character with a per-character
    mission (`belief_missions`) and every source fact of the belief is known to that
    character at N (witnessed, or told; `KnowledgeView`); otherwise it is the world's
    (holder "").

An UPDATE is judged again because it can add a source the holder never learnt (the belief
must leave that character's point of view) or change the subject. The judgement is written
into the belief's history entry of turn N (`"holder"`), so a rewind or a fork gives back the
holder the belief had at N (`observations.restore_belief_as_of`). A belief written before
the trail held holders gets its earlier holder noted on its previous entry when a judgement
changes it. Rows from before the column are the world's, as they were: old saves read unchanged.

**Restating the mission.** A small model asked to form beliefs "under a mission" often
writes the mission back as a belief. `restates_mission` refuses a CREATE or UPDATE whose
statement is the mission in other words: most of its index terms (`RESTATEMENT_OVERLAP`) are
the mission's. The bench measures the same thing with MiniLM cosine >= 0.9
(bench/knowledge.py, `--beliefs`); the pipeline uses the lexical test so a living turn needs
no embedding model.
"""

from __future__ import annotations

from studio.memory.knowledge.derive import KnowledgeView
from studio.memory.knowledge.names import fold
from studio.memory.retrieval.lexical import index_terms

__all__ = ["RESTATEMENT_OVERLAP", "restates_mission", "drop_mission_restatements", "assign_holders"]

# Share of a statement's index terms found in the mission above which it restates it.
# Chosen on the demo living save: its mission restatement ("Wren Halloway remembers debts: who owes whom
# ...") shares 0.86 of its terms with the mission; its five other beliefs at most 0.33.
RESTATEMENT_OVERLAP = 0.75


def restates_mission(statement: str, missions: list[str]) -> str:
    """Return the mission `statement` restates ("" when none)."""
    terms = set(index_terms(statement or ""))
    if len(terms) < 2:
        return ""
    for mission in missions:
        mission_terms = set(index_terms(mission or ""))
        if mission_terms and len(terms & mission_terms) / len(terms) >= RESTATEMENT_OVERLAP:
            return mission
    return ""


def drop_mission_restatements(actions: list, *, mission: str, missions: dict[str, str]) -> list:
    """Return `actions` without the CREATE / UPDATE actions that restate a mission."""
    texts = [m for m in [mission, *missions.values()] if m and m.strip()]
    kept = []
    for action in actions:
        if getattr(action, "kind", "") in ("CREATE", "UPDATE") and restates_mission(action.statement, texts):
            continue
        kept.append(action)
    return kept


def _judged(view, belief, with_mission: set[str]) -> str:
    """The holder the module's rule gives `belief` (view: the knowledge at the turn)."""
    if fold(belief.subject) not in with_mission:
        return ""
    name = view.index.resolve(belief.subject)
    sources = belief.sources or []
    if sources and all(view.fact(name, int(s["fact_id"]), int(s["turn_id"])).known for s in sources):
        return name
    return ""


def _trail_with_holder(history: list[dict], turn: int, *, before: str, holder: str) -> list[dict]:
    """`history` with the judgement of `turn` on its last entry of that turn (and the earlier holder, see the module)."""
    trail = [dict(h) for h in history or []]
    at_turn = [i for i, h in enumerate(trail) if int(h.get("turn_id") or 0) == turn]
    if not at_turn:
        return trail
    earlier = [i for i, h in enumerate(trail) if int(h.get("turn_id") or 0) < turn]
    if holder != before and earlier and not any("holder" in trail[i] for i in earlier):
        trail[earlier[-1]]["holder"] = before
    trail[at_turn[-1]]["holder"] = holder
    return trail


def assign_holders(save, turn: int, *, missions: dict[str, str]) -> int:
    """Judge the holder of the beliefs created or updated at `turn` (see the module); return how many are held."""
    from studio.memory.models import Observation

    with_mission = {fold(name) for name in missions}
    written = [
        b
        for b in Observation.objects.filter(game_save_id=save.pk, updated_turn_id=turn)
        if any(int(h.get("turn_id") or 0) == turn and h.get("action") in ("CREATE", "UPDATE") for h in b.history or [])
    ]
    if not written or (not with_mission and not any(b.holder for b in written)):
        return 0  # nothing is or can be held: nothing to write
    view = KnowledgeView(save, horizon=turn) if any(fold(b.subject) in with_mission for b in written) else None
    held, changed = 0, []
    for belief in written:
        holder = _judged(view, belief, with_mission) if view else ""
        history = _trail_with_holder(belief.history, turn, before=belief.holder, holder=holder)
        if (holder, history) != (belief.holder, belief.history):  # a job run again judges the same: no write
            belief.holder, belief.history = holder, history
            changed.append(belief)
        held += bool(holder)
    Observation.objects.bulk_update(changed, ["holder", "history"])  # one statement (per batch), not one per belief
    return held

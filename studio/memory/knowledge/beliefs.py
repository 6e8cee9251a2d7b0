"""Beliefs held by a character, and the refusal of beliefs that restate a mission.

**Holder and subject.** The engine contract's belief has one `subject` ("the entity it is
about / who holds it"). The studio keeps `subject` as what the belief is about and adds
`holder` (a column outside the contract): "" for the world's belief, a character's name for
a belief that character holds. The rule that tells a holder from the subject, applied once,
when the living pipeline writes a turn (`assign_holders`):

    a belief created at turn N is held by its subject when the subject is a character with
    a per-character mission (`belief_missions`) and every source fact of the belief is
    known to that character at N (witnessed, or told; `KnowledgeView`); otherwise it is the
    world's (holder "").

The holder is fixed at creation: an UPDATE keeps it, so a rewind (which deletes the beliefs
created after N and rolls the others back) leaves every kept belief with the holder it had
at N. Rows from before the column are the world's, as they were: old saves read unchanged.

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


def assign_holders(save, turn: int, *, missions: dict[str, str]) -> int:
    """Set the holder of the beliefs created at `turn` (see the module); return how many are held."""
    from studio.memory.models import Observation

    with_mission = {fold(name): name for name in missions}
    if not with_mission:
        return 0
    created = list(Observation.objects.filter(game_save_id=save.pk, created_turn_id=turn, holder=""))
    candidates = [b for b in created if fold(b.subject) in with_mission]
    if not candidates:
        return 0
    view = KnowledgeView(save, horizon=turn)
    held = 0
    for belief in candidates:
        name = view.index.resolve(belief.subject)
        sources = belief.sources or []
        if sources and all(view.fact(name, int(s["fact_id"]), int(s["turn_id"])).known for s in sources):
            Observation.objects.filter(pk=belief.pk).update(holder=name)
            held += 1
    return held

"""Keeping beliefs true to their facts: one belief per statement, none standing on nothing.

The bookkeeping `studio.memory.observations` applies around the engine's consolidation and
rollback (its module docstring states the rules, "Memory that follows edits" and
"Identical beliefs are one belief"):

- `same_statement` / `held_twin` / `belief_absorb`: a statement already held about a subject
  (case, spacing and a final full stop aside) takes the new sources as an UPDATE entry;
- `belief_retire`: a DELETE entry with the reason, the row kept as a tombstone;
- `beliefs_drop_missing_sources`: the sources an edit deleted dropped, a belief left with
  none retired.

Every write here is a trail entry stamped with a turn, so a rewind before it undoes it. The
functions change rows in memory and save them in the caller's transaction; none commits.
"""

from __future__ import annotations

from django.db.models import Q

from studio.memory.models import Fact as FactRow
from studio.memory.models import Observation as ObservationRow
from studio.memory.models import subject_key_for

CREATE = "CREATE"
UPDATE = "UPDATE"
DELETE = "DELETE"


def clean_sources(sources) -> list[dict]:
    """Return sources as [{"fact_id": int, "turn_id": int}], de-duplicated by fact id."""
    out: list[dict] = []
    seen: set[int] = set()
    for s in sources or []:
        try:
            fact_id = int(s.get("fact_id"))
            turn_id = int(s.get("turn_id") or 0)
        except (AttributeError, TypeError, ValueError):
            continue
        if fact_id in seen:
            continue
        seen.add(fact_id)
        out.append({"fact_id": fact_id, "turn_id": turn_id})
    return out


def trail_entry(
    action: str, turn_id: int, statement: str, subject: str, sources_added: list[dict], reason: str = ""
) -> dict:
    """Return one entry of a belief's trail (`reason`, when given: why a belief was retired)."""
    entry = {
        "action": action,
        "turn_id": int(turn_id),
        "statement": statement,
        "subject": subject,
        "sources_added": [dict(s) for s in sources_added],
    }
    if reason:
        entry["reason"] = reason
    return entry


def belief_retire(row: ObservationRow, turn_id: int, reason: str) -> None:
    """Mark `row` retired at `turn_id` with a DELETE entry saying why (the caller saves it)."""
    row.history = list(row.history or []) + [trail_entry(DELETE, turn_id, row.statement, row.subject, [], reason)]
    row.deleted_turn_id = int(turn_id)
    row.updated_turn_id = max(int(row.updated_turn_id or 0), int(turn_id))


def same_statement(statement: str) -> str:
    """Return the form two statements are compared in: case, spacing and a final full stop aside."""
    return " ".join((statement or "").casefold().split()).rstrip(".!").strip()


def held_twin(save_pk: int, subject: str, statement: str, *, exclude_pk: int | None = None):
    """Return the held belief about `subject` whose statement is `statement`'s (`same_statement`), or None."""
    text = " ".join((statement or "").split())
    bare = text.rstrip(".!").strip()
    rows = ObservationRow.objects.select_for_update().filter(
        Q(statement__iexact=text) | Q(statement__iexact=bare) | Q(statement__iexact=f"{bare}."),
        game_save_id=save_pk,
        subject_key=subject_key_for(subject),
    )
    if exclude_pk is not None:
        rows = rows.exclude(pk=exclude_pk)
    wanted = same_statement(statement)
    return next((row for row in rows.order_by("id") if same_statement(row.statement) == wanted), None)


def belief_absorb(row: ObservationRow, turn_id: int, statement: str, sources: list[dict]) -> None:
    """Add `sources` to `row` as an UPDATE entry at `turn_id` (the caller saves it)."""
    existing = clean_sources(row.sources)
    known = {s["fact_id"] for s in existing}
    added = [s for s in sources if s["fact_id"] not in known]
    row.sources = existing + added
    row.history = list(row.history or []) + [
        trail_entry(UPDATE, turn_id, statement or row.statement, row.subject, added)
    ]
    row.updated_turn_id = max(row.updated_turn_id, turn_id)
    row.stale = False


SOURCES_GONE = "every fact it stood on is gone (its turn was edited and extracted again)"


def beliefs_drop_missing_sources(
    save_pk: int, turn_id: int, *, rows, gone: set[int] | None = None, reason: str = SOURCES_GONE
) -> dict[str, int]:
    """Drop the sources that name deleted facts; retire a belief left with none.

    `rows` are the held beliefs to look at, locked by the caller's transaction; `gone` the
    ids of the facts just deleted (None: every cited fact not stored now). A belief that lost
    a source is flagged stale; one that lost them all is retired at `turn_id` (a DELETE entry
    with `reason`). Beliefs that never had a source are left as they are. Return
    {"dropped": beliefs that lost sources, "retired": beliefs retired}.
    """
    rows = [row for row in rows if row.sources]
    if gone is None:
        cited = {s["fact_id"] for row in rows for s in clean_sources(row.sources)}
        stored = (
            set(FactRow.objects.filter(game_save_id=save_pk, pk__in=cited).values_list("pk", flat=True))
            if cited
            else set()
        )
        gone = cited - stored
    counts = {"dropped": 0, "retired": 0}
    for row in rows:
        sources = clean_sources(row.sources)
        kept = [s for s in sources if s["fact_id"] not in gone]
        if len(kept) == len(sources):
            continue
        row.sources = kept
        row.stale = True
        counts["dropped"] += 1
        if not kept:
            belief_retire(row, turn_id, reason)
            counts["retired"] += 1
        row.save()
    return counts

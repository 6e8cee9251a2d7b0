"""Replay after a lore change: which recent turns' memory queries now return different results.

How it works
------------
- *Recording.* Every turn accepted from the Console's narrator stores the two vector
  queries its memory context ran (`narrator_accept`, source "narrator"); the engine's
  next-turn call records with `record: true` on the API's context (a POST); a playtester
  records from the Context viewer or the search playground with their "Record for lore
  replay" button (a POST). Each vector query is stored as a `RecordedQuery`: the save,
  the turn it was made at, the query text, its parameters (k, focus terms, chunk type
  filters) and the stable keys of its top results in rank order (`lore:<entry_id>` for lore — lore chunks get new ids on every re-sync —
  and `chunk:<id>` for narrative), with a short label per key. A rewind deletes the
  recorded queries of the turns it removes.
- *Replay.* For the recorded queries of the save's last N turns, the query is run again
  now, with the same parameters, against the same horizon (`max_turn_id` = the turn it was
  recorded at, `current_turn_id` = the save's current turn): narrative written after that
  turn cannot enter the result, so what changed comes from lore (or from an edited turn,
  which the report says too). "Before" is what play actually received; "after" is what
  it would receive now.
- *Report.* Per query: entries that entered and left the top k, rank moves, whether the
  top result changed; overall: how many queries changed, and which lore entries gained
  or lost places. The lore revisions made since the oldest replayed query are listed
  beside it, and a save whose lore re-sync has not finished yet is flagged (the replay
  would still see the old lore).

Nothing is written: a replay only reads.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field

from studio.memory.recall.search import memory_search, result_key
from studio.memory.models import Job, JobKind, JobStatus, RecordedQuery

DEFAULT_TURNS = 10
MAX_QUERIES = 200
QUERY_PARAMS = ("k", "focus_terms", "chunk_type", "exclude_chunk_type")


@dataclass
class ReplayedQuery:
    recorded: RecordedQuery
    before: list[str]
    after: list[str]
    labels: dict[str, str]
    seconds: float = 0.0

    @property
    def added(self) -> list[str]:
        return [key for key in self.after if key not in self.before]

    @property
    def removed(self) -> list[str]:
        return [key for key in self.before if key not in self.after]

    @property
    def moved(self) -> list[tuple[str, int, int]]:
        return [
            (key, self.before.index(key) + 1, self.after.index(key) + 1)
            for key in self.after
            if key in self.before and self.before.index(key) != self.after.index(key)
        ]

    @property
    def changed(self) -> bool:
        return self.before != self.after

    @property
    def top_changed(self) -> bool:
        return (self.before[:1] or [None]) != (self.after[:1] or [None])

    def rows(self) -> list[dict]:
        """Return the union of both result lists with each key's rank before and after."""
        keys = list(dict.fromkeys(self.after + self.before))
        return [
            {
                "key": key,
                "label": self.labels.get(key, ""),
                "before": self.before.index(key) + 1 if key in self.before else None,
                "after": self.after.index(key) + 1 if key in self.after else None,
                "lore": key.startswith("lore:"),
            }
            for key in keys
        ]


@dataclass
class ReplayReport:
    save_id: str
    turns: int
    queries: list[ReplayedQuery] = field(default_factory=list)
    lore_sync_pending: bool = False
    seconds: float = 0.0

    @property
    def changed(self) -> list[ReplayedQuery]:
        return [q for q in self.queries if q.changed]

    @property
    def top_changed_count(self) -> int:
        return sum(1 for q in self.queries if q.top_changed)

    def lore_movement(self) -> list[dict]:
        """Return each lore entry that entered or left some query's top k, with counts."""
        entered: Counter[str] = Counter()
        left: Counter[str] = Counter()
        for q in self.queries:
            entered.update(k for k in q.added if k.startswith("lore:"))
            left.update(k for k in q.removed if k.startswith("lore:"))
        keys = sorted(set(entered) | set(left))
        return [{"entry_id": k.split(":", 1)[1], "entered": entered[k], "left": left[k]} for k in keys]


def recorded_queries_for(*, game_save, turns: int = DEFAULT_TURNS):
    """Return the recorded queries of the save's last `turns` turns (newest first, capped)."""
    first_turn = max(game_save.current_turn - turns + 1, 0)
    return RecordedQuery.objects.filter(
        game_save=game_save, turn_id__gte=first_turn, turn_id__lte=game_save.current_turn
    ).order_by("-turn_id", "-id")[:MAX_QUERIES]


def lore_sync_pending(*, game_save) -> bool:
    """True while a lore re-sync of this save is queued or running (a replay would see old lore)."""
    return Job.objects.filter(
        game_save=game_save, kind=JobKind.SYNC_LORE, status__in=(JobStatus.QUEUED, JobStatus.RUNNING)
    ).exists()


def replay_recorded_queries(*, game_save, turns: int = DEFAULT_TURNS, vector_memory=None) -> ReplayReport:
    """Run the recorded queries of the last `turns` turns again and compare their top results."""
    started = time.perf_counter()
    if vector_memory is None:
        from studio.memory.vector import get_vector_memory

        vector_memory = get_vector_memory()
    report = ReplayReport(
        save_id=game_save.save_id, turns=turns, lore_sync_pending=lore_sync_pending(game_save=game_save)
    )
    for recorded in recorded_queries_for(game_save=game_save, turns=turns):
        params = {key: recorded.params[key] for key in QUERY_PARAMS if recorded.params.get(key) is not None}
        t0 = time.perf_counter()
        # At the save's current turn (memory_search's clamp), narrowed to the recorded turn.
        results = memory_search(
            game_save=game_save,
            query_text=recorded.query_text,
            max_turn_id=recorded.turn_id,
            vector_memory=vector_memory,
            **params,
        ).results
        labels = dict(recorded.params.get("labels") or {})
        for result in results:
            labels.setdefault(result_key(result), (result.get("text") or "")[:160])
        report.queries.append(
            ReplayedQuery(
                recorded=recorded,
                before=list(recorded.result_ids or []),
                after=[result_key(r) for r in results],
                labels=labels,
                seconds=time.perf_counter() - t0,
            )
        )
    report.seconds = time.perf_counter() - started
    return report

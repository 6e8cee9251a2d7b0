"""Search a save's narrative memory: the one place the turn horizon is clamped.

Every memory search the studio makes goes through `memory_search` (the JSON API's query,
the search playground, the context builder's narrative and lore queries, lore replay) or
`memory_explain_chunk` (the playground's "why not this chunk?"). Both pass
`memory_horizon(...)` to `VectorMemory` as `current_turn_id`, so the rule is typed once:

- The horizon is never beyond the save's current turn. A chunk a failed rewind left behind
  (turn > current) must never come back, whatever a client or a form asks for; a lower
  horizon is kept (reading the save as it was at an earlier turn is allowed). The API's
  fact, belief and mental model reads clamp their `max_turn_id` with the same function.
- `max_turn_id` is passed through unchanged: the store filters on
  min(current_turn_id, max_turn_id), so it can only narrow the clamped horizon further.
- A query that names a time ("in May 2023", "three days ago") in a save whose turns record
  story time gets the temporal arm: `temporal.time_preference` picks the turns inside that
  time, the search prefers them and its stats say so (`named_time`). Any other query runs
  exactly as before (no arm, no record). A caller that has read that preference already for
  the same query and horizon (the memory context: once for all its layers) passes it as
  `prefer` and the search reads no story time.
- With `record_source` given, the search is stored as a `RecordedQuery` (see
  `studio.memory.recall.replay`) with the parameters it ran with, `None` ones dropped, and
  params["source"] = record_source. Whether the user may record is the caller's check
  (a view decides by role and passes `record_source` only when allowed).

Failure modes: a vector store that cannot be reached raises `VectorStoreError` from
`get_vector_memory()` or from the query, unchanged (the API maps it to 503); a store that
fails mid-query and a missing embedding model degrade inside `VectorMemory` and say so in
the returned stats. Nothing here opens a transaction: the vector work must not run inside
one, and the recorded row is a single insert.

The stable result keys (`result_key`) and the recording (`query_record`, `record_query`,
`record_context_queries`) live here too,
beside the search that produces what they store; `studio.memory.recall.context` and
`studio.memory.recall.replay` use them from here.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from studio.memory.models import RecordedQuery
from studio.memory.recall.temporal import time_preference

if TYPE_CHECKING:
    from studio.memory.retrieval.temporal import TimePreference
    from studio.memory.vector import QueryStats, VectorMemory
    from studio.world.models import Save

# `memory_search`'s default `prefer`: read the save's story time for the query's named time.
READ_STORY_TIME = "read the save's story time"


def memory_horizon(*, game_save: Save, turn_id: int | None = None) -> int:
    """Return the turn a read of `game_save` may see up to: `turn_id`, never past the current turn.

    None means the save's current turn.
    """
    current = game_save.current_turn
    return current if turn_id is None else min(int(turn_id), current)


@dataclass(frozen=True)
class MemorySearch:
    """One search's answer: the clamped horizon it ran at, its results and what it did."""

    current_turn_id: int
    results: list[dict[str, Any]]
    stats: QueryStats
    # Wall time of the vector query alone (the playground shows it beside the stage timings).
    elapsed_ms: float
    recorded: RecordedQuery | None = None


def _vector_memory(vector_memory: VectorMemory | None) -> VectorMemory:
    if vector_memory is not None:
        return vector_memory
    # Resolved at call time: tests and the demo loader swap the process-wide instance.
    from studio.memory.vector import get_vector_memory

    return get_vector_memory()


def memory_search(
    *,
    game_save: Save,
    query_text: str,
    k: int = 5,
    current_turn_id: int | None = None,
    max_turn_id: int | None = None,
    focus_terms: list[str] | None = None,
    chunk_type: str | None = None,
    exclude_chunk_type: str | None = None,
    expand_links: bool = False,
    record_source: str | None = None,
    vector_memory: VectorMemory | None = None,
    prefer: TimePreference | None | str = READ_STORY_TIME,
) -> MemorySearch:
    """Search the save's chunks (`VectorMemory.query_explained`) at the clamped horizon.

    `current_turn_id` asks for an earlier horizon than the save's current turn (a later one
    is clamped, see `memory_horizon`); the other search parameters are the engine's. A time
    the query names brings in the temporal arm (`time_preference`). With `record_source`,
    store the search for lore replay and return the row as `recorded`.

    `prefer`: `READ_STORY_TIME` (the default) reads the save's story time here; a caller
    that has read it already for the same query and horizon (the memory context, once for
    all its layers) passes its `time_preference` result, None included.
    """
    horizon = memory_horizon(game_save=game_save, turn_id=current_turn_id)
    store = _vector_memory(vector_memory)
    started = time.perf_counter()
    if prefer is READ_STORY_TIME:
        prefer = time_preference(game_save=game_save, query_text=query_text, horizon=horizon, chunk_type=chunk_type)
    outcome = store.query_explained(
        game_save.save_id,
        query_text,
        k=k,
        current_turn_id=horizon,
        max_turn_id=max_turn_id,
        focus_terms=focus_terms,
        chunk_type=chunk_type,
        exclude_chunk_type=exclude_chunk_type,
        expand_links=expand_links,
        prefer=prefer,
    )
    elapsed_ms = round((time.perf_counter() - started) * 1000, 1)
    recorded = None
    if record_source is not None:
        recorded = record_query(
            game_save=game_save,
            query_text=query_text,
            params={
                "k": k,
                "focus_terms": focus_terms,
                "chunk_type": chunk_type,
                "exclude_chunk_type": exclude_chunk_type,
                "source": record_source,
            },
            results=outcome.results,
        )
    return MemorySearch(
        current_turn_id=horizon, results=outcome.results, stats=outcome.stats, elapsed_ms=elapsed_ms, recorded=recorded
    )


def memory_explain_chunk(
    *,
    game_save: Save,
    query_text: str,
    chunk_id: str,
    k: int = 5,
    current_turn_id: int | None = None,
    max_turn_id: int | None = None,
    focus_terms: list[str] | None = None,
    chunk_type: str | None = None,
    exclude_chunk_type: str | None = None,
    vector_memory: VectorMemory | None = None,
) -> dict[str, Any]:
    """Return where one chunk ranked for a search at the clamped horizon (`VectorMemory.explain_chunk`),
    the temporal arm included when the query names a time, as `memory_search` runs it."""
    horizon = memory_horizon(game_save=game_save, turn_id=current_turn_id)
    return _vector_memory(vector_memory).explain_chunk(
        game_save.save_id,
        query_text,
        chunk_id,
        k=k,
        current_turn_id=horizon,
        max_turn_id=max_turn_id,
        focus_terms=focus_terms,
        chunk_type=chunk_type,
        exclude_chunk_type=exclude_chunk_type,
        prefer=time_preference(game_save=game_save, query_text=query_text, horizon=horizon, chunk_type=chunk_type),
    )


def result_key(result: dict) -> str:
    """Return a key for a query result that survives re-embedding.

    A lore chunk is re-created on every lore sync (new chunk id), so it is keyed by its
    entry; a narrative chunk keeps its id until its turn is edited or rewound.
    """
    entry_id = result.get("entry_id") or (result.get("metadata") or {}).get("entry_id")
    if result.get("chunk_type") == "lore" and entry_id:
        return f"lore:{entry_id}"
    return f"chunk:{result.get('id')}"


def query_record(*, query_text: str, params: dict, results: list[dict]) -> dict[str, Any]:
    """Return what a recording keeps of one search: its text, parameters and top results.

    `params` lose their None values; `result_ids` are the stable keys (`result_key`) of the
    results in rank order, with a short label per key in `params["labels"]`. Link expansions
    (`explain["expanded_from"]`) are left out: a replay re-runs the query itself, and
    compares its top k.
    """
    results = [r for r in results if not (r.get("explain") or {}).get("expanded_from")]
    clean = {k: v for k, v in params.items() if v is not None}
    return {
        "query_text": query_text,
        "params": {**clean, "labels": {result_key(r): (r.get("text") or "")[:160] for r in results}},
        "result_ids": [result_key(r) for r in results],
    }


def record_query(*, game_save: Save, query_text: str, params: dict, results: list[dict]) -> RecordedQuery:
    """Store a memory query made during play with the stable keys of its top results."""
    record = query_record(query_text=query_text, params=params, results=results)
    return RecordedQuery.objects.create(game_save=game_save, turn_id=game_save.current_turn, **record)


def record_context_queries(
    *, game_save: Save, queries: list[dict], source: str, turn_id: int | None = None
) -> list[RecordedQuery]:
    """Store the queries a memory context ran (`MemoryContext.queries`) as RecordedQuery rows.

    `turn_id` is the turn the queries were asked at (default: the save's current turn); the
    narrator's accept passes the turn before the one it appends. Malformed records (a
    context stored by an older studio) are skipped.
    """
    rows = [
        RecordedQuery(
            game_save=game_save,
            turn_id=game_save.current_turn if turn_id is None else turn_id,
            query_text=query["query_text"],
            params={**query["params"], "source": source},
            result_ids=list(query["result_ids"]),
        )
        for query in queries or []
        if isinstance(query, dict)
        and isinstance(query.get("query_text"), str)
        and isinstance(query.get("params"), dict)
        and isinstance(query.get("result_ids"), list)
    ]
    return RecordedQuery.objects.bulk_create(rows)

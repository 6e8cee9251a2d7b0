"""The studio's own save-file sections: turns, living memory, jobs, the LLM call log, queries.

Every item is written with file-local ids and read back against them:
- `turns`: one item per turn, numbered 1..current turn in order, with the turn's state
  (`null` when the save kept no state row for it) and the time it was played.
- `facts` (`id`), `beliefs` (`id`; `sources` and each history entry's `sources_added` name
  facts by file id and carry the fact's turn, the rollback key), `mental_models` (`id`;
  `sources` and each version's `sources` name beliefs by file id). Retired beliefs
  (tombstones, `deleted_turn_id` set) are exported too, so a rewind of the imported save
  brings them back exactly as it would in the original. References to rows the save no
  longer holds (the old facts of a re-extracted turn) are left out, as a fork does.
- `jobs`: the outcomes of finished jobs (done, failed, skipped): kind, turn, generation,
  status, attempts, progress, error, result and LLM usage. Jobs still queued, running or
  paused are in flight and not exported; neither are the vector-store bookkeeping jobs
  (rewind deletes and fork copies: the vectors are rebuilt on import), nor the embedding
  jobs an import queued itself (payload `rederive`), so an imported save exports the file it
  came from.
- `llm_calls`: the call log with its times (the hourly spend guard reads them), each call
  pointing at its job's file id or null.
- `recorded_queries`: queries recorded for lore-edit replay. Their `result_ids` are kept as
  recorded: lore results are keyed by entry and compare after import; narrative results
  name the original's chunk ids, so a replay shows them as changed.

Ordering is stable (facts by turn then creation, everything else by creation), and an
import inserts items in file order, so the pks of an imported save sort as the file does.
"""

from __future__ import annotations

from studio.saves.portable.registry import SaveSection, derive_sections_with, register_section
from studio.saves.portable.sections.derived import derived_section
from studio.saves.portable.sections.logs import (
    check_jobs,
    check_llm_calls,
    check_recorded_queries,
    export_jobs,
    export_llm_calls,
    export_recorded_queries,
    load_jobs,
    load_llm_calls,
    load_recorded_queries,
)
from studio.saves.portable.sections.memory import (
    check_beliefs,
    check_facts,
    check_mental_models,
    export_beliefs,
    export_facts,
    export_mental_models,
    load_beliefs,
    load_facts,
    load_mental_models,
)
from studio.saves.portable.sections.turns import check_turns, export_turns, load_turns

CORE_SECTIONS = [
    SaveSection("turns", 1, export_turns, check_turns, load_turns, required=True),
    SaveSection("facts", 1, export_facts, check_facts, load_facts, required=True),
    SaveSection("beliefs", 1, export_beliefs, check_beliefs, load_beliefs, required=True),
    SaveSection("mental_models", 1, export_mental_models, check_mental_models, load_mental_models, required=True),
    SaveSection("jobs", 1, export_jobs, check_jobs, load_jobs, order=52, required=True),
    SaveSection("llm_calls", 1, export_llm_calls, check_llm_calls, load_llm_calls, order=54, required=True),
    SaveSection(
        "recorded_queries",
        2,
        export_recorded_queries,
        check_recorded_queries,
        load_recorded_queries,
        required=True,
        reads=(1,),
    ),
]

for _section in CORE_SECTIONS:
    register_section(_section)
# A per-turn table whose section no one wrote gets one derived from its columns.
derive_sections_with(derived_section)

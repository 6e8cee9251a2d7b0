"""What the memory app's background jobs do; registered by `MemoryConfig.ready()`.

- `lore`      SYNC_LORE: embed a Lore Book (a universe's own, then each save's).
- `embedding` EMBED_TURN: embed (or re-embed) turns' narratives, one or a batch at a time.
- `living`    LIVING_TURN: extract -> facts -> consolidate -> beliefs -> reflect -> mental
              models; REFRESH_MODELS: regenerate the mental models a rewind left stale.

Each handler takes a `studio.memory.jobs.JobContext`, re-reads the rows it needs, and
either returns a result (vector-only work) or writes through `JobContext.commit` (the
writes and the DONE status in one transaction, after the ownership and timeline checks).

The living pipeline makes every LLM call first (extract, consolidate, reflect - nothing is
written while they run) and then writes facts, beliefs and mental models in that one
transaction. A failed or garbled call therefore leaves nothing half-written, and a job
re-run after a crash starts from a clean slate (its earlier run committed nothing).
"""

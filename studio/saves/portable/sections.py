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

from datetime import timezone as dt_timezone
from typing import Any, Iterable, Iterator

from django.db import connection, models
from django.utils import timezone

from studio.memory.models import Fact, Job, JobKind, JobStatus, LLMCall, MentalModel, Observation, RecordedQuery
from studio.memory.models import entity_index_for, subject_key_for
from studio.saves.models import Event, StateCache
from studio.saves.portable.registry import (
    INVALID,
    CheckContext,
    ExportContext,
    ImportContext,
    SaveSection,
    register_section,
)

EXPORTED_JOB_STATUSES = (JobStatus.DONE, JobStatus.FAILED, JobStatus.SKIPPED)
# Bookkeeping of the vector store, which is not in the file (it is rebuilt on import).
UNPORTABLE_JOB_KINDS = (JobKind.VECTOR_ROLLBACK, JobKind.FORK_VECTORS)
PORTABLE_JOB_KINDS = [k for k in JobKind.values if k not in UNPORTABLE_JOB_KINDS]
REDERIVE_MARKER = "rederive"  # payload key on the jobs an import queues for itself
BATCH = 1000


def iso(value) -> str | None:
    """Return a time as UTC ISO 8601 with microseconds and a Z (the file's one time format)."""
    if value is None:
        return None
    return value.astimezone(dt_timezone.utc).isoformat(timespec="microseconds").replace("+00:00", "Z")


def insert_rows(model, rows: Iterable[dict[str, Any]]) -> None:
    """INSERT rows ({attname: value}) with one executemany per batch; unnamed columns get
    their defaults (auto_now_add columns: now).

    Given times are stored as they are: the ORM's bulk_create would stamp `created_at` with
    the import time, and the file's times are part of the save (the timeline shows them, the
    spend guard counts LLM calls by them). It is also several times faster than bulk_create,
    whose per-field preparation dominated an import of 2,000 turns.
    """
    meta = model._meta
    fields = [f for f in meta.concrete_fields if not f.primary_key]
    now = timezone.now()
    defaults: dict[str, Any] = {}
    for f in fields:
        if getattr(f, "auto_now", False) or getattr(f, "auto_now_add", False):
            defaults[f.attname] = now
        else:
            defaults[f.attname] = f.get_default()  # the declared default, "" for text, else None

    def adapter(f):
        if isinstance(f, models.JSONField):
            return lambda value: f.get_db_prep_save(value, connection=connection)
        if isinstance(f, models.DateTimeField):
            return connection.ops.adapt_datetimefield_value
        return None  # text, integers, booleans and foreign keys go to the driver as they are

    plan = [(f.attname, adapter(f)) for f in fields]
    table = connection.ops.quote_name(meta.db_table)
    names = ", ".join(connection.ops.quote_name(f.column) for f in fields)
    sql = f"INSERT INTO {table} ({names}) VALUES ({', '.join(['%s'] * len(fields))})"
    batch: list[list[Any]] = []
    with connection.cursor() as cursor:
        for row in rows:
            values = []
            for name, adapt in plan:
                value = row[name] if name in row else defaults[name]
                values.append(adapt(value) if adapt is not None else value)
            batch.append(values)
            if len(batch) >= BATCH:
                cursor.executemany(sql, batch)
                batch = []
        if batch:
            cursor.executemany(sql, batch)


def _new_pks(model, game_save, file_ids: list[int]) -> dict[int, int]:
    """Map the file ids of rows just inserted (in that order) to their new pks.

    The save is new, so its rows of `model` are exactly these, and pks grow in insertion
    order on both databases (one writer per save; a sequence or rowid only ever grows).
    """
    pks = list(model._base_manager.filter(game_save_id=game_save.pk).order_by("pk").values_list("pk", flat=True))
    if len(pks) != len(file_ids):
        raise RuntimeError(f"expected {len(file_ids)} new {model._meta.verbose_name_plural}, found {len(pks)}")
    return dict(zip(file_ids, pks))


def _items(ctx: CheckContext, items: list, where: str, spec: dict, *, optional=()) -> Iterator[tuple[str, dict]]:
    for index, raw in enumerate(items):
        loc = f"{where}[{index}]"
        item = ctx.checker.record(raw, loc, spec, optional=optional)
        if item is not None:
            yield loc, item


def _readers(ctx: CheckContext):
    c = ctx.checker
    return {
        "int": lambda **kw: (lambda v, loc: c.integer(v, loc, **kw)),
        "text": lambda **kw: (lambda v, loc: c.text(v, loc, **kw)),
        "bool": lambda: (lambda v, loc: c.boolean(v, loc)),
        "time": lambda: (lambda v, loc: c.timestamp(v, loc)),
        "object": lambda **kw: (lambda v, loc: c.mapping(v, loc, **kw)),
        "turn": lambda **kw: (lambda v, loc: ctx.turn(v, loc, **kw)),
    }


# -- turns -----------------------------------------------------------------------------------


def export_turns(ctx: ExportContext) -> Iterator[dict]:
    pk = ctx.game_save.pk
    states = StateCache.objects.filter(game_save_id=pk).order_by("turn_id").values_list("turn_id", "state").iterator(chunk_size=BATCH)
    pending = next(states, None)
    events = Event.objects.filter(game_save_id=pk).order_by("turn_id")
    for event in events.values_list("turn_id", "player_input", "narrative", "created_at").iterator(chunk_size=BATCH):
        turn_id, player_input, narrative, created_at = event
        while pending is not None and pending[0] < turn_id:
            pending = next(states, None)  # a state without its turn is not part of the save
        state = None
        if pending is not None and pending[0] == turn_id:
            state = pending[1]
            pending = next(states, None)
        yield {
            "turn_id": turn_id,
            "player_input": player_input,
            "narrative": narrative,
            "created_at": iso(created_at),
            "state": state,
        }


def check_turns(items: list, ctx: CheckContext, where: str) -> list[dict]:
    r = _readers(ctx)
    limits = ctx.checker.limits
    spec = {
        "turn_id": r["int"](minimum=1),
        "player_input": r["text"](max_length=limits.max_player_input_chars),
        "narrative": r["text"](max_length=limits.max_narrative_chars),
        "created_at": r["time"](),
        "state": r["object"](nullable=True),
    }
    out = []
    turns = ctx.ids.setdefault("turns", {})
    for index, raw in enumerate(items):
        loc = f"{where}[{index}]"
        item = ctx.checker.record(raw, loc, spec)
        if item is None:
            continue
        expected = index + 1
        if "turn_id" in item and item["turn_id"] != expected:
            ctx.checker.add(
                f"{loc}.turn_id",
                f"turns must be numbered 1, 2, 3… in order: expected turn {expected} here, found turn {item['turn_id']}",
            )
            continue
        turns[expected] = True
        out.append(item)
    if len(items) != ctx.current_turn:
        ctx.checker.add(
            where,
            f"holds {len(items)} turns but save.current_turn is {ctx.current_turn}; "
            "a save holds every turn from 1 to its current turn",
        )
    return out


def load_turns(items: list[dict], ctx: ImportContext) -> int:
    pk = ctx.game_save.pk
    insert_rows(Event, ({"game_save_id": pk, **{k: i[k] for k in ("turn_id", "player_input", "narrative", "created_at")}} for i in items))
    insert_rows(StateCache, ({"game_save_id": pk, "turn_id": i["turn_id"], "state": i["state"]} for i in items if i["state"] is not None))
    return len(items)


# -- facts -----------------------------------------------------------------------------------

FACT_TEXT_FIELDS = ("who", "what", "when", "where", "why")


def export_facts(ctx: ExportContext) -> Iterator[dict]:
    ids = ctx.file_ids.setdefault("facts", {})
    rows = Fact.objects.filter(game_save_id=ctx.game_save.pk).order_by("turn_id", "id")
    for number, row in enumerate(rows.iterator(chunk_size=BATCH), start=1):
        ids[row.pk] = number
        yield {
            "id": number,
            "turn_id": row.turn_id,
            "statement": row.statement,
            "fact_type": row.fact_type,
            **{name: getattr(row, name) for name in FACT_TEXT_FIELDS},
            "entities": list(row.entities or []),
        }


def check_facts(items: list, ctx: CheckContext, where: str) -> list[dict]:
    r = _readers(ctx)
    c = ctx.checker
    spec = {
        "id": lambda v, loc: ctx.unique_id(v, loc, "facts"),
        "turn_id": r["turn"](),
        "statement": r["text"](),
        "fact_type": r["text"](max_length=40),
        **{name: r["text"]() for name in FACT_TEXT_FIELDS},
        "entities": lambda v, loc: _string_list(c, v, loc, max_length=200),
    }
    ids = ctx.ids.setdefault("facts", {})
    out = []
    for _loc, item in _items(ctx, items, where, spec):
        if "id" in item and "turn_id" in item:
            ids[item["id"]] = item["turn_id"]
        if len(item) == len(spec):
            out.append(item)
    return out


def _string_list(c, value, loc, *, max_length: int):
    value = c.array(value, loc)
    if value is INVALID:
        return value
    for index, entry in enumerate(value):
        if c.text(entry, f"{loc}[{index}]", max_length=max_length) is INVALID:
            return INVALID
    return value


def load_facts(items: list[dict], ctx: ImportContext) -> int:
    pk = ctx.game_save.pk
    insert_rows(
        Fact,
        (
            {
                "game_save_id": pk,
                **{name: i[name] for name in ("turn_id", "statement", "fact_type", *FACT_TEXT_FIELDS, "entities")},
                "entity_index": entity_index_for(i["entities"]),  # Fact.save() is not called
            }
            for i in items
        ),
    )
    ctx.db_ids["facts"] = _new_pks(Fact, ctx.game_save, [i["id"] for i in items])
    return len(items)


# -- beliefs ---------------------------------------------------------------------------------

HISTORY_KEYS = ("action", "turn_id", "statement", "subject", "sources_added")


def _export_sources(sources, fact_ids: dict[int, int]) -> list[dict]:
    out = []
    for source in sources or []:
        try:
            fact_pk = int(source.get("fact_id"))
        except (AttributeError, TypeError, ValueError):
            continue
        if fact_pk in fact_ids:
            out.append({"fact_id": fact_ids[fact_pk], "turn_id": int(source.get("turn_id") or 0)})
    return out


def export_beliefs(ctx: ExportContext) -> Iterator[dict]:
    fact_ids = ctx.file_ids.get("facts", {})
    ids = ctx.file_ids.setdefault("beliefs", {})
    rows = Observation.all_objects.filter(game_save_id=ctx.game_save.pk).order_by("id")
    for number, row in enumerate(rows.iterator(chunk_size=BATCH), start=1):
        ids[row.pk] = number
        history = []
        for entry in row.history or []:
            kept = {key: entry[key] for key in HISTORY_KEYS if key in entry}
            if "sources_added" in kept:
                kept["sources_added"] = _export_sources(kept["sources_added"], fact_ids)
            history.append(kept)
        yield {
            "id": number,
            "statement": row.statement,
            "subject": row.subject,
            "sources": _export_sources(row.sources, fact_ids),
            "history": history,
            "created_turn_id": row.created_turn_id,
            "updated_turn_id": row.updated_turn_id,
            "stale": row.stale,
            "deleted_turn_id": row.deleted_turn_id,
        }


def _check_sources(ctx: CheckContext, value, loc: str):
    c = ctx.checker
    value = c.array(value, loc)
    if value is INVALID:
        return value
    facts = ctx.ids.get("facts", {})
    ok = True
    for index, raw in enumerate(value):
        entry_loc = f"{loc}[{index}]"
        source = c.record(
            raw,
            entry_loc,
            {
                "fact_id": lambda v, l: ctx.reference(v, l, "facts", what="fact"),
                "turn_id": lambda v, l: ctx.turn(v, l),
            },
        )
        if source is None or len(source) != 2:
            ok = False
            continue
        if facts[source["fact_id"]] != source["turn_id"]:
            c.add(
                f"{entry_loc}.turn_id",
                f"is {source['turn_id']}, but fact {source['fact_id']} is from turn {facts[source['fact_id']]}",
            )
            ok = False
    return value if ok else INVALID


def check_beliefs(items: list, ctx: CheckContext, where: str) -> list[dict]:
    r = _readers(ctx)
    c = ctx.checker

    def history(value, loc):
        value = c.array(value, loc)
        if value is INVALID:
            return value
        ok = True
        for index, raw in enumerate(value):
            entry = c.record(
                raw,
                f"{loc}[{index}]",
                {
                    "action": r["text"](max_length=40),
                    "turn_id": r["turn"](),
                    "statement": r["text"](),
                    "subject": r["text"](max_length=200),
                    "sources_added": lambda v, l: _check_sources(ctx, v, l),
                },
                optional=("statement", "subject", "sources_added"),
            )
            ok = ok and entry is not None and len(entry) == len(raw)
        return value if ok else INVALID

    spec = {
        "id": lambda v, loc: ctx.unique_id(v, loc, "beliefs"),
        "statement": r["text"](),
        "subject": r["text"](max_length=200),
        "sources": lambda v, loc: _check_sources(ctx, v, loc),
        "history": history,
        "created_turn_id": r["turn"](),
        "updated_turn_id": r["turn"](),
        "stale": r["bool"](),
        "deleted_turn_id": r["turn"](nullable=True),
    }
    ids = ctx.ids.setdefault("beliefs", {})
    out = []
    for _loc, item in _items(ctx, items, where, spec):
        if "id" in item:
            ids[item["id"]] = True
        if len(item) == len(spec):
            out.append(item)
    return out


def load_beliefs(items: list[dict], ctx: ImportContext) -> int:
    fact_ids = ctx.db_ids.get("facts", {})

    def remap(sources: list[dict]) -> list[dict]:
        return [{"fact_id": fact_ids[s["fact_id"]], "turn_id": s["turn_id"]} for s in sources]

    def row(i: dict) -> dict:
        sources = remap(i["sources"])
        return {
            "game_save_id": ctx.game_save.pk,
            "statement": i["statement"],
            "subject": i["subject"],
            # Observation.save() is not called: derive its three columns here.
            "subject_key": subject_key_for(i["subject"]),
            "proof_count": len(sources),
            "last_source_turn": max((s["turn_id"] for s in sources), default=0),
            "sources": sources,
            "history": [
                {**entry, "sources_added": remap(entry["sources_added"])} if "sources_added" in entry else dict(entry)
                for entry in i["history"]
            ],
            **{name: i[name] for name in ("created_turn_id", "updated_turn_id", "stale", "deleted_turn_id")},
        }

    insert_rows(Observation, (row(i) for i in items))
    ctx.db_ids["beliefs"] = _new_pks(Observation, ctx.game_save, [i["id"] for i in items])
    return len(items)


# -- mental models ---------------------------------------------------------------------------


def _export_belief_ids(values, belief_ids: dict[int, int]) -> list[int]:
    out = []
    for value in values or []:
        try:
            pk = int(value)
        except (TypeError, ValueError):
            continue
        if pk in belief_ids:
            out.append(belief_ids[pk])
    return out


def export_mental_models(ctx: ExportContext) -> Iterator[dict]:
    belief_ids = ctx.file_ids.get("beliefs", {})
    ids = ctx.file_ids.setdefault("mental_models", {})
    rows = MentalModel.objects.filter(game_save_id=ctx.game_save.pk).order_by("id")
    for number, row in enumerate(rows.iterator(chunk_size=BATCH), start=1):
        ids[row.pk] = number
        yield {
            "id": number,
            "subject": row.subject,
            "summary": row.summary,
            "sources": _export_belief_ids(row.sources, belief_ids),
            "versions": [
                {
                    "turn_id": int(version.get("turn_id") or 0),
                    "summary": version.get("summary") or "",
                    "sources": _export_belief_ids(version.get("sources"), belief_ids),
                }
                for version in row.versions or []
            ],
            "created_turn_id": row.created_turn_id,
            "updated_turn_id": row.updated_turn_id,
            "stale": row.stale,
        }


def check_mental_models(items: list, ctx: CheckContext, where: str) -> list[dict]:
    r = _readers(ctx)
    c = ctx.checker

    def belief_refs(value, loc):
        value = c.array(value, loc)
        if value is INVALID:
            return value
        results = [ctx.reference(v, f"{loc}[{n}]", "beliefs", what="belief") for n, v in enumerate(value)]
        return INVALID if any(x is INVALID for x in results) else value

    def versions(value, loc):
        value = c.array(value, loc)
        if value is INVALID:
            return value
        spec = {"turn_id": r["turn"](), "summary": r["text"](), "sources": belief_refs}
        checked = [c.record(raw, f"{loc}[{n}]", spec) for n, raw in enumerate(value)]
        return value if all(v is not None and len(v) == 3 for v in checked) else INVALID

    spec = {
        "id": lambda v, loc: ctx.unique_id(v, loc, "mental_models"),
        "subject": r["text"](max_length=200),
        "summary": r["text"](),
        "sources": belief_refs,
        "versions": versions,
        "created_turn_id": r["turn"](),
        "updated_turn_id": r["turn"](),
        "stale": r["bool"](),
    }
    ids = ctx.ids.setdefault("mental_models", {})
    subjects: dict[str, int] = {}
    out = []
    for loc, item in _items(ctx, items, where, spec):
        if "id" in item:
            ids[item["id"]] = True
        if len(item) != len(spec):
            continue
        key = subject_key_for(item["subject"])
        if key in subjects:
            c.add(
                f"{loc}.subject",
                f"mental model {subjects[key]} already has the subject {item['subject']!r}; a save holds one per subject",
            )
            continue
        subjects[key] = item["id"]
        out.append(item)
    return out


def load_mental_models(items: list[dict], ctx: ImportContext) -> int:
    belief_ids = ctx.db_ids.get("beliefs", {})
    insert_rows(
        MentalModel,
        (
            {
                "game_save_id": ctx.game_save.pk,
                "subject": i["subject"],
                "subject_key": subject_key_for(i["subject"]),  # MentalModel.save() is not called
                "summary": i["summary"],
                "sources": [belief_ids[b] for b in i["sources"]],
                "versions": [{**v, "sources": [belief_ids[b] for b in v["sources"]]} for v in i["versions"]],
                **{name: i[name] for name in ("created_turn_id", "updated_turn_id", "stale")},
            }
            for i in items
        ),
    )
    ctx.db_ids["mental_models"] = _new_pks(MentalModel, ctx.game_save, [i["id"] for i in items])
    return len(items)


# -- jobs ------------------------------------------------------------------------------------

JOB_FIELDS = ("kind", "turn_id", "timeline_generation", "status", "attempts", "progress", "error", "result", "llm_calls", "llm_tokens")


def exported_jobs(game_save):
    """Return the save's jobs that belong in its file (finished, portable, not re-derived)."""
    rows = (
        Job.objects.filter(game_save_id=game_save.pk, status__in=EXPORTED_JOB_STATUSES)
        .exclude(kind__in=UNPORTABLE_JOB_KINDS)
        .order_by("id")
        .only("id", "payload", *JOB_FIELDS)
    )
    for row in rows.iterator(chunk_size=BATCH):
        if not (row.payload or {}).get(REDERIVE_MARKER):
            yield row


def export_jobs(ctx: ExportContext) -> Iterator[dict]:
    ids = ctx.file_ids.setdefault("jobs", {})
    for number, row in enumerate(exported_jobs(ctx.game_save), start=1):
        ids[row.pk] = number
        yield {"id": number, **{name: getattr(row, name) for name in JOB_FIELDS}}


def check_jobs(items: list, ctx: CheckContext, where: str) -> list[dict]:
    r = _readers(ctx)
    c = ctx.checker
    statuses = [str(s) for s in EXPORTED_JOB_STATUSES]

    def kind(value, loc):
        if value in UNPORTABLE_JOB_KINDS:
            c.add(loc, f"{value} jobs are not portable: they track the vector store, which is rebuilt on import")
            return INVALID
        return c.choice(value, loc, PORTABLE_JOB_KINDS)

    def status(value, loc):
        if value in (JobStatus.QUEUED, JobStatus.RUNNING, JobStatus.PAUSED):
            c.add(loc, f"a {value} job is still in flight; a save file holds finished jobs only ({', '.join(statuses)})")
            return INVALID
        return c.choice(value, loc, statuses)

    def generation(value, loc):
        value = c.integer(value, loc)
        if value is not INVALID and value > ctx.timeline_generation:
            c.add(loc, f"generation {value} is after the save's timeline generation {ctx.timeline_generation}")
            return INVALID
        return value

    spec = {
        "id": lambda v, loc: ctx.unique_id(v, loc, "jobs"),
        "kind": kind,
        # A job's turn may lie past the current turn: rewinds keep the jobs of the dead timeline.
        "turn_id": r["int"](nullable=True),
        "timeline_generation": generation,
        "status": status,
        "attempts": r["int"](),
        "progress": r["text"](max_length=200),
        "error": r["text"](),
        "result": r["object"](),
        "llm_calls": r["int"](),
        "llm_tokens": r["int"](),
    }
    ids = ctx.ids.setdefault("jobs", {})
    out = []
    for _loc, item in _items(ctx, items, where, spec):
        if "id" in item:
            ids[item["id"]] = True
        if len(item) == len(spec):
            out.append(item)
    return out


def load_jobs(items: list[dict], ctx: ImportContext) -> int:
    save = ctx.game_save
    insert_rows(
        Job,
        ({"universe_id": save.universe_id, "game_save_id": save.pk, **{name: i[name] for name in JOB_FIELDS}} for i in items),
    )
    ctx.db_ids["jobs"] = _new_pks(Job, save, [i["id"] for i in items])
    return len(items)


# -- LLM calls -------------------------------------------------------------------------------

LLM_CALL_FIELDS = ("operation", "model", "prompt_tokens", "completion_tokens", "latency_ms", "error")


def export_llm_calls(ctx: ExportContext) -> Iterator[dict]:
    job_ids = ctx.file_ids.get("jobs", {})
    rows = LLMCall.objects.filter(game_save_id=ctx.game_save.pk).order_by("id")
    for row in rows.iterator(chunk_size=BATCH):
        yield {
            "job_id": job_ids.get(row.job_id),
            **{name: getattr(row, name) for name in LLM_CALL_FIELDS},
            "created_at": iso(row.created_at),
        }


def check_llm_calls(items: list, ctx: CheckContext, where: str) -> list[dict]:
    r = _readers(ctx)

    def job(value, loc):
        if value is None:
            return None
        return ctx.reference(value, loc, "jobs", what="job")

    spec = {
        "job_id": job,
        "operation": r["text"](max_length=20),
        "model": r["text"](max_length=200),
        "prompt_tokens": r["int"](),
        "completion_tokens": r["int"](),
        "latency_ms": r["int"](),
        "error": r["text"](),
        "created_at": r["time"](),
    }
    return [item for _loc, item in _items(ctx, items, where, spec) if len(item) == len(spec)]


def load_llm_calls(items: list[dict], ctx: ImportContext) -> int:
    job_ids = ctx.db_ids.get("jobs", {})
    insert_rows(
        LLMCall,
        (
            {
                "game_save_id": ctx.game_save.pk,
                "job_id": job_ids[i["job_id"]] if i["job_id"] is not None else None,
                **{name: i[name] for name in (*LLM_CALL_FIELDS, "created_at")},
            }
            for i in items
        ),
    )
    return len(items)


# -- recorded queries ------------------------------------------------------------------------


def export_recorded_queries(ctx: ExportContext) -> Iterator[dict]:
    rows = RecordedQuery.objects.filter(game_save_id=ctx.game_save.pk).order_by("id")
    for row in rows.iterator(chunk_size=BATCH):
        yield {
            "turn_id": row.turn_id,
            "query_text": row.query_text,
            "params": row.params,
            "result_ids": list(row.result_ids or []),
        }


def check_recorded_queries(items: list, ctx: CheckContext, where: str) -> list[dict]:
    r = _readers(ctx)
    c = ctx.checker
    spec = {
        "turn_id": r["turn"](),
        "query_text": r["text"](),
        "params": r["object"](),
        "result_ids": lambda v, loc: _string_list(c, v, loc, max_length=400),
    }
    return [item for _loc, item in _items(ctx, items, where, spec) if len(item) == len(spec)]


def load_recorded_queries(items: list[dict], ctx: ImportContext) -> int:
    insert_rows(
        RecordedQuery,
        ({"game_save_id": ctx.game_save.pk, **{k: i[k] for k in ("turn_id", "query_text", "params", "result_ids")}} for i in items),
    )
    return len(items)


CORE_SECTIONS = [
    SaveSection("turns", 1, export_turns, check_turns, load_turns, order=10, required=True),
    SaveSection("facts", 1, export_facts, check_facts, load_facts, order=20, required=True),
    SaveSection("beliefs", 1, export_beliefs, check_beliefs, load_beliefs, order=30, required=True),
    SaveSection("mental_models", 1, export_mental_models, check_mental_models, load_mental_models, order=40, required=True),
    SaveSection("jobs", 1, export_jobs, check_jobs, load_jobs, order=50, required=True),
    SaveSection("llm_calls", 1, export_llm_calls, check_llm_calls, load_llm_calls, order=60, required=True),
    SaveSection("recorded_queries", 1, export_recorded_queries, check_recorded_queries, load_recorded_queries, order=70, required=True),
]

for _section in CORE_SECTIONS:
    register_section(_section)

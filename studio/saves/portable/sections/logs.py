"""The log sections: finished `jobs`, the `llm_calls` log and `recorded_queries`."""

from __future__ import annotations

from typing import Any, Iterator

from studio.memory.models import Job, JobStatus, LLMCall, RecordedQuery
from studio.saves.portable.registry import INVALID, CheckContext, ExportContext, ImportContext
from studio.saves.narrator.snapshots import SEPARATOR, Reference, context_decode
from studio.saves.portable.recorded import RecordCodec, VerifiedWriter
from studio.saves.portable.recorded_items import canonical
from studio.saves.portable.sections.memory import _string_list
from studio.saves.portable.sections.rows import (
    BATCH,
    EXPORTED_JOB_STATUSES,
    INPUT,
    PORTABLE_JOB_KINDS,
    REDERIVE_MARKER,
    UNPORTABLE_JOB_KINDS,
    _complete_items,
    _items,
    _new_pks,
    _readers,
    as_turn_text,
    from_turn_text,
    insert_rows,
    iso,
    turn_texts,
)


JOB_FIELDS = (
    "kind",
    "turn_id",
    "timeline_generation",
    "status",
    "attempts",
    "progress",
    "error",
    "result",
    "llm_calls",
    "llm_tokens",
)


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
            c.add(
                loc, f"a {value} job is still in flight; a save file holds finished jobs only ({', '.join(statuses)})"
            )
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
    return _complete_items(ctx, items, where, spec, section="jobs")


def load_jobs(items: list[dict], ctx: ImportContext) -> int:
    save = ctx.game_save
    insert_rows(
        Job,
        (
            {"universe_id": save.universe_id, "game_save_id": save.pk, **{name: i[name] for name in JOB_FIELDS}}
            for i in items
        ),
    )
    ctx.db_ids["jobs"] = _new_pks(Job, save, [i["id"] for i in items])
    return len(items)


# -- LLM calls -------------------------------------------------------------------------------

LLM_CALL_FIELDS = ("operation", "model", "prompt_tokens", "completion_tokens", "latency_ms", "error")


def export_llm_calls(ctx: ExportContext) -> Iterator[dict]:
    job_ids = ctx.file_ids.get("jobs", {})
    # A spend guard's refusal is not part of the save (nothing was spent), nor is whose request it was.
    rows = LLMCall.objects.filter(game_save_id=ctx.game_save.pk, refused=False).order_by("id")
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


KIND_KEYS = ("chunk_type", "exclude_chunk_type", "source")


def _kind(params) -> str:
    """Which earlier query a recorded query is written against: the last one of the same kind."""
    params = params if isinstance(params, dict) else {}
    return canonical([params.get(key) for key in KIND_KEYS])


def _split(params) -> tuple[dict, Any]:
    """(the kind's keys, the rest): version 2 writes the kind as it is and the rest against the last query of that kind."""
    if not isinstance(params, dict):
        return {}, params
    return (
        {key: params[key] for key in KIND_KEYS if key in params},
        {key: value for key, value in params.items() if key not in KIND_KEYS},
    )


def _chat(texts: dict) -> str:
    """What a recorded query's strings copy from: the file's turns, inputs and narratives (a result's label quotes one)."""
    return SEPARATOR.join(f"{texts[turn][0]}{SEPARATOR}{texts[turn][1]}" for turn in sorted(texts) if turn >= 1)


def export_recorded_queries(ctx: ExportContext) -> Iterator[dict]:
    texts = turn_texts(ctx.game_save)
    chat = _chat(texts)
    reference = Reference(chat)
    previous: dict[str, dict] = {}
    kinds: dict[str, int] = {}
    writer = VerifiedWriter()  # the params (a result's labels) and the result ids against the file's last ones
    rows = RecordedQuery.objects.filter(game_save_id=ctx.game_save.pk).order_by("id")
    for row in rows.iterator(chunk_size=BATCH):
        kind, rest = _split(row.params)
        before = previous.get(_kind(row.params), {})
        result_ids = list(row.result_ids or [])
        params, ids = writer.write([rest, result_ids], [before.get("rest"), before.get("result_ids")], reference, chat)
        yield {
            "turn_id": row.turn_id,
            # The narrator's queries ask with the next turn's input: null says so (`rows.as_turn_text`).
            "query_text": as_turn_text(row.query_text, texts, row.turn_id + 1, INPUT),
            # The kind's keys as they are, or the number of a kind an earlier item gave.
            "kind": kinds.get(canonical(kind), kind),
            "params": params,
            "result_ids": ids,
        }
        kinds.setdefault(canonical(kind), len(kinds))
        previous[_kind(row.params)] = {"rest": rest, "result_ids": result_ids}


def check_recorded_queries(items: list, ctx: CheckContext, where: str) -> list[dict]:
    r = _readers(ctx)
    c = ctx.checker
    previous: dict[str, dict] = {}
    kinds: list[dict] = []
    codec = RecordCodec()
    own = ctx.ids.get("turns", {})
    chat = _chat({turn: texts for turn, texts in own.items() if isinstance(texts, tuple)})
    spec = {
        "turn_id": r["turn"](),
        "query_text": lambda v, loc: v if v is None else c.text(v, loc),
        "params": r["object"](),
        "result_ids": lambda v, loc: v,
    }
    if ctx.version >= 2:
        spec["kind"] = lambda v, loc: v
    out = []
    for loc, item in _items(ctx, items, where, spec):
        if len(item) != len(spec):
            continue
        try:
            if ctx.version < 2:  # written before version 2: the whole params, the kind's keys as they are
                before = previous.get(_kind(item["params"]), {})
                item["params"] = context_decode(item["params"], before.get("params"), "")
                item["result_ids"] = context_decode(item["result_ids"], before.get("result_ids"), "")
            else:
                kind = item.pop("kind")
                if type(kind) is int and 0 <= kind < len(kinds):
                    kind = kinds[kind]
                elif not isinstance(kind, dict) or set(kind) - set(KIND_KEYS):
                    raise ValueError(
                        f"the kind is an object of {', '.join(KIND_KEYS)} or the number of one given before"
                    )
                elif all(canonical(kind) != canonical(k) for k in kinds):
                    kinds.append(kind)
                before = previous.get(_kind(kind), {})
                if RecordCodec.reset_at(item["params"]):
                    codec = RecordCodec()
                rest = codec.decode(item["params"], before.get("rest"), chat)
                item["result_ids"] = codec.decode(item["result_ids"], before.get("result_ids"), chat)
                if not isinstance(rest, dict) or set(rest) & set(KIND_KEYS):
                    raise ValueError("params must be an object without the kind's keys")
                item["params"] = {**rest, **kind}
        except ValueError as exc:
            c.add(loc, str(exc))
            continue
        if c.mapping(item["params"], f"{loc}.params") is INVALID:
            continue
        if _string_list(c, item["result_ids"], f"{loc}.result_ids", max_length=400) is INVALID:
            continue
        item["query_text"] = from_turn_text(ctx, item["query_text"], f"{loc}.query_text", item["turn_id"] + 1, INPUT)
        if item["query_text"] is not INVALID:
            out.append(item)
            kind, rest = _split(item["params"])
            previous[_kind(item["params"])] = {"params": item["params"], "result_ids": item["result_ids"], "rest": rest}
    return out


def load_recorded_queries(items: list[dict], ctx: ImportContext) -> int:
    insert_rows(
        RecordedQuery,
        (
            {"game_save_id": ctx.game_save.pk, **{k: i[k] for k in ("turn_id", "query_text", "params", "result_ids")}}
            for i in items
        ),
    )
    return len(items)

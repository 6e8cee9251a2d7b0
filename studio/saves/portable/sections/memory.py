"""The living-memory sections: `facts`, `beliefs` (with their history and tombstones) and `mental_models`."""

from __future__ import annotations

from typing import Iterator

from studio.memory.models import Fact, MentalModel, Observation
from studio.memory.models import entity_index_for, subject_key_for
from studio.saves.portable.registry import INVALID, CheckContext, ExportContext, ImportContext
from studio.saves.portable.sections.rows import _complete_items, BATCH, insert_rows, _new_pks, _items, _readers


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

HISTORY_KEYS = (
    "action",
    "turn_id",
    "statement",
    "subject",
    "sources_added",
    "reason",
)  # reason: why a belief was retired


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
                "fact_id": lambda v, loc: ctx.reference(v, loc, "facts", what="fact"),
                "turn_id": lambda v, loc: ctx.turn(v, loc),
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
                    "sources_added": lambda v, loc: _check_sources(ctx, v, loc),
                    "reason": r["text"](max_length=400),
                },
                optional=("statement", "subject", "sources_added", "reason"),
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
    return _complete_items(ctx, items, where, spec, section="beliefs")


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

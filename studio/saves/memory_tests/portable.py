"""The save file's optional `memory_test_results` section (registered by `SavesConfig.ready()`).

One item per recorded result, in turn then name order::

    {"turn_id": 12, "name": "mira-learns-the-ledger", "kind": "knows",
     "definition": {"name": "mira-learns-the-ledger", "kind": "knows", "turn": 10, ...},
     "verdict": "fail", "summary": "Mira does not know ...", "explain": [{"record": "knowledge", ...}],
     "ran_at": "2025-01-01T12:00:00.000000Z"}

The definition is checked as every test is (`spec.parse_spec`), so a file cannot carry a test
the studio could not have run. Optional: a file without the section imports with no results.
"""

from __future__ import annotations

from collections.abc import Iterator

from studio.saves.memory_tests.models import MemoryTestResult, Verdict
from studio.saves.portable.registry import INVALID, CheckContext, ExportContext, ImportContext, SaveSection
from studio.saves.portable.sections.rows import iso
from studio.universes.memory_tests.spec import KINDS, NAME_RE, SpecError, parse_spec

MAX_SUMMARY_CHARS = 5000
MAX_EXPLAIN_RECORDS = 100


def export_results(ctx: ExportContext) -> Iterator[dict]:
    for row in MemoryTestResult.objects.filter(game_save_id=ctx.game_save.pk).order_by("turn_id", "name"):
        yield {
            "turn_id": row.turn_id,
            "name": row.name,
            "kind": row.kind,
            "definition": row.definition,
            "verdict": row.verdict,
            "summary": row.summary,
            "explain": row.explain,
            "ran_at": iso(row.ran_at),
        }


def check_results(items: list, ctx: CheckContext, where: str) -> list[dict]:
    c = ctx.checker

    def name(value, loc):
        if not isinstance(value, str) or not NAME_RE.match(value):
            c.add(loc, "must be a test name (a slug of at most 80 characters)")
            return INVALID
        return value

    def definition(value, loc):
        value = c.mapping(value, loc)
        if value is INVALID:
            return value
        try:
            parse_spec(value)
        except SpecError as exc:
            c.add(loc, f"is not a memory test: {exc}")
            return INVALID
        return value

    def explain(value, loc):
        value = c.array(value, loc, max_items=MAX_EXPLAIN_RECORDS)
        if value is INVALID:
            return value
        for index, record in enumerate(value):
            if c.mapping(record, f"{loc}[{index}]") is INVALID:
                return INVALID
        return value

    spec = {
        "turn_id": lambda v, loc: ctx.turn(v, loc),
        "name": name,
        "kind": lambda v, loc: c.choice(v, loc, KINDS),
        "definition": definition,
        "verdict": lambda v, loc: c.choice(v, loc, Verdict.values),
        "summary": lambda v, loc: c.text(v, loc, max_length=MAX_SUMMARY_CHARS),
        "explain": explain,
        "ran_at": lambda v, loc: c.timestamp(v, loc),
    }
    out, seen = [], set()
    for loc, item in ctx.complete_records(items, where, spec):
        key = (item["turn_id"], item["name"])
        if key in seen:
            c.add(f"{loc}.name", f"test {item['name']} has two results at turn {item['turn_id']}")
            continue
        if item["definition"].get("name") != item["name"] or item["definition"].get("kind") != item["kind"]:
            c.add(f"{loc}.definition", "names another test than the result's name and kind")
            continue
        seen.add(key)
        out.append(item)
    return out


def load_results(items: list[dict], ctx: ImportContext) -> int:
    MemoryTestResult.objects.bulk_create(
        [MemoryTestResult(game_save=ctx.game_save, **item) for item in items], batch_size=1000
    )
    return len(items)


SECTION = SaveSection("memory_test_results", 1, export_results, check_results, load_results, optional=True)

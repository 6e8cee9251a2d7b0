"""The save file's `continuity_findings` section (optional; registered by `SavesConfig.ready()`).

One item per finding of an accepted turn (a draft's, for the turn after the current one, stays
behind with its draft), in turn order::

    {"turn_id": 7, "alternative": 1, "kind": "leak", "verdict": "found", "resolution": "accepted",
     "regenerated_as": null, "sentence": "...", "character": "Pim", "item_layer": "fact",
     "item_ref": {"fact_id": 12}, "item_text": "...", "item_turn": 4, "why": "...", "judge": ""}

A fact or a belief the finding cites is named by its file id in the `facts` / `beliefs` section
(one the file does not carry is dropped from the reference, the text stays). The draft a finding
was found in is not carried (drafts never travel).
"""

from __future__ import annotations

from collections.abc import Iterator

from studio.memory.continuity.models import ContinuityFinding, FindingKind, FindingResolution, FindingVerdict
from studio.memory.continuity.timeline_tables import remap_ref
from studio.saves.portable.registry import CheckContext, ExportContext, ImportContext, SaveSection

FIELDS = (
    "turn_id",
    "alternative",
    "kind",
    "verdict",
    "resolution",
    "regenerated_as",
    "sentence",
    "character",
    "item_layer",
    "item_ref",
    "item_text",
    "item_turn",
    "why",
    "judge",
)
LAYERS = ("lore", "fact", "belief", "turn", "presence")


def export_findings(ctx: ExportContext) -> Iterator[dict]:
    ids = {"facts": ctx.file_ids.get("facts", {}), "beliefs": ctx.file_ids.get("beliefs", {})}
    rows = ContinuityFinding.objects.filter(game_save_id=ctx.game_save.pk, turn_id__lte=ctx.game_save.current_turn)
    for row in rows.order_by("turn_id", "id"):
        item = {name: getattr(row, name) for name in FIELDS}
        item["item_ref"] = remap_ref(row.item_layer, row.item_ref, ids)
        yield item


def check_findings(items: list, ctx: CheckContext, where: str) -> list[dict]:
    c = ctx.checker
    spec = {
        "turn_id": lambda v, loc: ctx.turn(v, loc, first=1),
        "alternative": lambda v, loc: c.integer(v, loc, minimum=1),
        "kind": lambda v, loc: c.choice(v, loc, FindingKind.values),
        "verdict": lambda v, loc: c.choice(v, loc, FindingVerdict.values),
        "resolution": lambda v, loc: c.choice(v, loc, FindingResolution.values),
        "regenerated_as": lambda v, loc: c.integer(v, loc, minimum=1, nullable=True),
        "sentence": lambda v, loc: c.text(v, loc, max_length=20_000),
        "character": lambda v, loc: v if v == "" else c.limited(v, loc, "character.name"),
        "item_layer": lambda v, loc: c.choice(v, loc, LAYERS),
        "item_ref": lambda v, loc: c.mapping(v, loc),
        "item_text": lambda v, loc: c.text(v, loc),
        "item_turn": lambda v, loc: c.integer(v, loc, nullable=True),
        "why": lambda v, loc: c.text(v, loc, max_length=20_000),
        "judge": lambda v, loc: c.text(v, loc, max_length=20_000),
    }
    out = []
    for loc, item in ctx.complete_records(items, where, spec):
        ref = item["item_ref"]
        for layer, (section, key) in (("fact", ("facts", "fact_id")), ("belief", ("beliefs", "belief_id"))):
            if item["item_layer"] == layer and key in ref and ref[key] not in ctx.ids.get(section, {}):
                c.add(f"{loc}.item_ref.{key}", f"points at {layer} {ref[key]}, which is not in the file's {section}")
                break
        else:
            out.append(item)
    return out


def load_findings(items: list[dict], ctx: ImportContext) -> int:
    ids = {"facts": ctx.db_ids.get("facts", {}), "beliefs": ctx.db_ids.get("beliefs", {})}
    ContinuityFinding.objects.bulk_create(
        [
            ContinuityFinding(
                game_save=ctx.game_save, **{**item, "item_ref": remap_ref(item["item_layer"], item["item_ref"], ids)}
            )
            for item in items
        ],
        batch_size=1000,
    )
    return len(items)


SECTION = SaveSection("continuity_findings", 1, export_findings, check_findings, load_findings, optional=True)

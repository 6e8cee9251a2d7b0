"""The demo's living save: memory recorded once on a real model, loaded without any LLM.

`bench/demo_living_record.py` ran the studio's own living pipeline (extraction,
consolidation, reflection) on a real model over the demo's first turns and wrote three files
into `studio/universes/demo/living/`:

- `save.axiom-save.json`: the save as a portable save file (turns, states, facts, beliefs
  with their history, mental models, jobs and the studio's LLM call log);
- `llm-exchanges.jsonl`: every request sent and the model's answer as received;
- `provenance.json`: the model, the endpoint kind, the dates, the settings, the turns.

`bench/demo_chapters_record.py` then closed the save's chapters by the studio's rules (scene
changes, the turn limit, arcs) and summarised them on a real model: the file carries them
(`chapters` section), and the provenance's `chapters` block says which model, when, with
which prompt (its hash) and code.

`demo_living_load(universe=...)` imports the save file (`save_import`) as the save
`demo-living`. It is idempotent: when that save exists and exports to the same bytes as the
file, nothing is written; when it differs (played on, rewound, or the file changed) it is
replaced. No LLM is called: the import only queues the embedding of the turns and the lore
sync. `recording_for(save)` gives the save pages their "recorded with <model> on <date>" line
(and which model summarised the chapters), and only for that save while the provenance file
exists, so no other save's memory is ever attributed to a model it did not come from.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from django.db import transaction

from studio.plural import counted
from studio.world.models import Save
from studio.universes.demo.loader import DEMO_DIR, DemoDataError

logger = logging.getLogger(__name__)

LIVING_DIR = DEMO_DIR / "living"  # the recording is demo data, kept beside the universe files
LIVING_SAVE_FILE = LIVING_DIR / "save.axiom-save.json"
PROVENANCE_FILE = LIVING_DIR / "provenance.json"
EXCHANGES_FILE = LIVING_DIR / "llm-exchanges.jsonl"
DEMO_LIVING_SAVE_ID = "demo-living"


@dataclass
class DemoLivingResult:
    outcome: str  # "created", "replaced", "unchanged" or "missing"
    game_save: Save | None = None
    counts: dict[str, int] | None = None
    provenance: dict[str, Any] | None = None

    @property
    def changed(self) -> bool:
        return self.outcome in ("created", "replaced")

    def summary_line(self) -> str:
        if self.outcome == "missing":
            return "  living demo save: no recording in studio/universes/demo/living/, skipped"
        rec = recording_summary(self.provenance)
        told = f" ({rec['text']})" if rec else ""
        counts = self.counts or {}
        detail = ", ".join(
            f"{counts[k]} {k}" for k in ("facts", "beliefs", "mental_models", "llm_calls") if k in counts
        )
        return f"  living demo save {DEMO_LIVING_SAVE_ID!r}: {self.outcome}{told}" + (f"; {detail}" if detail else "")


def provenance_read(path: Path = PROVENANCE_FILE) -> dict[str, Any] | None:
    """Return the recording's provenance, or None when there is no (readable) file."""
    path = Path(path)
    try:
        stamp = path.stat().st_mtime_ns
    except OSError:
        return None
    return _provenance_cached(str(path), stamp)


@lru_cache(maxsize=4)
def _provenance_cached(path: str, stamp: int) -> dict[str, Any] | None:
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        logger.warning("Unreadable demo provenance file %s", path, exc_info=True)
        return None
    return data if isinstance(data, dict) and data.get("model") else None


def recording_summary(provenance: dict[str, Any] | None) -> dict[str, Any] | None:
    """Return what the save page says about a recording: model, date, turns, and the sentence."""
    if not provenance:
        return None
    model = str(provenance.get("model") or "").strip()
    date = str(provenance.get("recorded_to") or provenance.get("recorded_from") or "")[:10]
    if not model or not date:
        return None
    turns = int(provenance.get("turns_recorded") or 0)
    requested = int(provenance.get("turns_requested") or turns)
    span = f"over the first {turns} turns" if turns < requested else f"over {turns} turns"
    return {
        "model": model,
        "date": date,
        "turns": turns,
        "partial": turns < requested,
        "endpoint_kind": str(provenance.get("endpoint_kind") or ""),
        "text": f"recorded with {model} on {date} {span}",
        "chapters_text": chapters_text(provenance.get("chapters")),
    }


def chapters_text(chapters: Any) -> str:
    """Say which model summarised the recorded chapters, and when ("" when the recording has none)."""
    if not isinstance(chapters, dict):
        return ""
    model = str(chapters.get("model") or "").strip()
    date = str(chapters.get("recorded_to") or "")[:10]
    counts = chapters.get("counts") or {}
    number, arcs = int(counts.get("chapters") or 0), int(counts.get("arcs") or 0)
    if not model or not date or not number:
        return ""
    rows = counted(number, "chapter") + (f" and {counted(arcs, 'arc')}" if arcs else "")
    return f"The summaries of its {rows} were recorded with {model} on {date}."


def recording_for(game_save: Save) -> dict[str, Any] | None:
    """The recording behind `game_save`'s living memory, for the demo living save only."""
    if getattr(game_save, "save_id", None) != DEMO_LIVING_SAVE_ID:
        return None
    return recording_summary(provenance_read())


def _export_bytes(game_save: Save) -> bytes:
    from studio.saves.portable.services import save_export

    export = save_export(game_save=game_save)
    try:
        return export.file.read()
    finally:
        export.file.close()


def _same_recording(exported: bytes, recorded: bytes) -> bool:
    """Whether the save holds exactly what the recorded file holds.

    Byte equality first; else the same header (but the universe's lore hash) and the same items in every section the file
    carries (a section the file wrote in an older version: the same items once both are read).
    Optional sections the file lacks (added to the format after the recording, such
    as the lore activation rows, which an import recomputes) are not compared, so a newer
    studio does not re-import an unchanged recording on every load.
    """
    if exported == recorded:
        return True
    try:
        mine, theirs = json.loads(exported), json.loads(recorded)
    except ValueError:
        return False

    def header(document: dict) -> dict:
        # The universe's lore hash says which Lore Book the file was exported against; the demo
        # universe gains entries after the recording (the knowledge save's secrets), and that
        # changes no row of this save.
        universe = {k: v for k, v in (document.get("universe") or {}).items() if k != "lore_hash"}
        return {**{k: v for k, v in document.items() if k != "sections"}, "universe": universe}

    if header(mine) != header(theirs):
        return False
    sections, recorded_sections = mine.get("sections") or {}, theirs.get("sections") or {}
    if not all((section or {}).get("optional") for name, section in sections.items() if name not in recorded_sections):
        return False
    differing = [name for name, section in recorded_sections.items() if sections.get(name) != section]
    if not differing:
        return True
    # A section the recording wrote in an older version (the format moved on since): the same when it reads the same.
    if not all(
        isinstance(sections.get(name), dict)
        and isinstance(recorded_sections[name], dict)
        and sections[name].get("version") != recorded_sections[name].get("version")
        for name in differing
    ):
        return False
    from studio.saves.portable.registry import SaveFileError
    from studio.saves.portable.services import save_file_check

    try:
        read = [
            {section.name: items for section, items in save_file_check(document=document).sections}
            for document in (mine, theirs)
        ]
    except SaveFileError:
        return False
    return all(read[0].get(name) == read[1].get(name) for name in differing)


def _delete_vectors(save_id: str) -> None:
    try:
        from studio.memory.vector import get_vector_memory

        get_vector_memory().rollback(save_id, -1)
    except Exception:  # the vector store may be unavailable; the rows are what matters
        logger.warning("Could not delete vector chunks of %s", save_id, exc_info=True)


def demo_living_load(
    *, universe, save_path: Path = LIVING_SAVE_FILE, provenance_path: Path = PROVENANCE_FILE
) -> DemoLivingResult:
    """Create (or restore) the demo's living save from the recorded file; idempotent, no LLM."""
    from studio.saves.portable.registry import SaveFileError
    from studio.saves.portable.services import save_file_read, save_import

    save_path = Path(save_path)
    provenance = provenance_read(provenance_path)
    if not save_path.exists() or provenance is None:
        return DemoLivingResult(outcome="missing")
    data = save_path.read_bytes()
    existing = Save.objects.filter(save_id=DEMO_LIVING_SAVE_ID).first()
    if existing is not None:
        if existing.universe_id != universe.pk:
            raise DemoDataError(
                f"save {DEMO_LIVING_SAVE_ID!r} already exists in another universe ({existing.universe})"
            )
        if _same_recording(_export_bytes(existing), data):
            return DemoLivingResult(outcome="unchanged", game_save=existing, provenance=provenance)
    try:
        checked = save_file_read(data=data)
    except SaveFileError as exc:
        raise DemoDataError(f"{save_path}: {exc}") from exc
    with transaction.atomic():
        if existing is not None:
            existing.delete()
            transaction.on_commit(lambda: _delete_vectors(DEMO_LIVING_SAVE_ID))
        imported = save_import(universe=universe, checked=checked)
        # The stable key: the embedding jobs the import queued run after this commit and
        # read the save (and its save_id) then.
        Save.objects.filter(pk=imported.game_save.pk).update(save_id=DEMO_LIVING_SAVE_ID)
        imported.game_save.save_id = DEMO_LIVING_SAVE_ID
    return DemoLivingResult(
        outcome="replaced" if existing is not None else "created",
        game_save=imported.game_save,
        counts=dict(imported.counts),
        provenance=provenance,
    )

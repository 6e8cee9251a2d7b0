"""The 48-turn demo save's chapters: closed by the studio's rules, summarised once on a real model.

`bench/demo_chapters_record.py --save classic` replayed, over the demo save's 48 turns (as
`load_demo` loads them from `universes/demo/save.jsonl`), the call `turn_append` makes after
each turn (`chapter_after_turn`): scene changes and the turn limit closed ten chapters, which
rolled up into two arcs, and the summary jobs ran on a real model. It wrote into
`universes/demo/chapters/`:

- `chapters.json`: the rows, each as the save file's `chapters` section holds it
  (`studio.memory.chapters.timeline.COPIED_FIELDS`);
- `llm-exchanges.jsonl`: every request sent and the model's answer as received;
- `provenance.json`: a `chapters` block (model, endpoint, dates, the prompt's hash, the code
  commit, settings, and per row its turns, why it closed and its call).

`demo_chapters_load(game_save=...)` gives the demo save exactly these rows: nothing is written
when it holds them already; otherwise its chapter rows are replaced (in one transaction). No
LLM is called. A file that does not read as chapter rows of a 48-turn save is refused
(`DemoDataError`) with nothing written. `chapters_recording_for(save)` gives the save pages
their "summaries recorded with <model> on <date>" line, for that save only.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.db import transaction

from studio.memory.chapters.models import Chapter, ChapterCloseReason, SummaryStatus
from studio.memory.chapters.timeline import COPIED_FIELDS
from studio.saves.demo_living import chapters_text, provenance_read
from studio.world.models import Save
from studio.universes.demo.loader import DEMO_DIR, DemoDataError

CHAPTERS_DIR = DEMO_DIR / "chapters"
CHAPTERS_FILE = CHAPTERS_DIR / "chapters.json"
CHAPTERS_PROVENANCE = CHAPTERS_DIR / "provenance.json"
FORMAT = "axiom-demo-chapters"
TEXT_FIELDS = (
    "close_note",
    "story_time_start",
    "story_time_end",
    "summary",
    "summary_error",
    "summary_model",
    "generated_summary",
)


@dataclass
class DemoChaptersResult:
    outcome: str  # "created", "replaced", "unchanged" or "missing"
    chapters: int = 0
    arcs: int = 0

    def summary_line(self) -> str:
        if self.outcome == "missing":
            return "  demo save chapters: no recording in studio/universes/demo/chapters/, skipped"
        return (
            f"  demo save chapters: {self.outcome}; {self.chapters} chapters and {self.arcs} arcs with their summaries"
        )


def demo_chapters_read(*, path: Path = CHAPTERS_FILE, turns: int) -> tuple[str, list[dict[str, Any]]] | None:
    """Return (save id, rows) from the file (None when there is none); raise DemoDataError naming what is wrong."""
    path = Path(path)
    if not path.exists():
        return None
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise DemoDataError(f"{path.name}: not readable JSON ({exc})") from exc
    if (
        not isinstance(document, dict)
        or document.get("format") != FORMAT
        or not isinstance(document.get("items"), list)
    ):
        raise DemoDataError(f'{path.name}: expected {{"format": "{FORMAT}", "items": [...]}}')
    rows = []
    for index, item in enumerate(document["items"]):
        where = f"{path.name}: items[{index}]"
        if not isinstance(item, dict) or set(item) != set(COPIED_FIELDS):
            raise DemoDataError(f"{where}: expected exactly the fields {', '.join(COPIED_FIELDS)}")
        numbers = [item[name] for name in ("level", "first_turn", "last_turn", "closed_turn")]
        if not all(isinstance(n, int) and not isinstance(n, bool) for n in numbers):
            raise DemoDataError(f"{where}: level and turns are whole numbers")
        if not 1 <= item["first_turn"] <= item["last_turn"] <= item["closed_turn"] <= turns:
            raise DemoDataError(
                f"{where}: turns {item['first_turn']}-{item['last_turn']} (closed at "
                f"{item['closed_turn']}) do not lie within the save's {turns} turns in order"
            )
        if item["close_reason"] not in ChapterCloseReason.values or item["summary_status"] not in SummaryStatus.values:
            raise DemoDataError(f"{where}: unknown close_reason or summary_status")
        if not all(isinstance(item[name], str) for name in TEXT_FIELDS) or not isinstance(item["edited"], bool):
            raise DemoDataError(f"{where}: texts are strings and edited is true or false")
        rows.append(item)
    return str(document.get("save_id") or ""), rows


def _rows_of(game_save: Save) -> list[dict[str, Any]]:
    return list(Chapter.objects.filter(game_save=game_save).order_by("level", "first_turn").values(*COPIED_FIELDS))


def demo_chapters_load(*, game_save: Save, path: Path = CHAPTERS_FILE) -> DemoChaptersResult:
    """Give the demo save the recorded chapters and summaries; idempotent, no LLM."""
    read = demo_chapters_read(path=path, turns=game_save.current_turn)
    if read is None:
        return DemoChaptersResult(outcome="missing")
    save_id, rows = read
    if save_id and save_id != game_save.save_id:
        raise DemoDataError(f"{Path(path).name} records the chapters of save {save_id!r}, not {game_save.save_id!r}")
    wanted = sorted(rows, key=lambda r: (r["level"], r["first_turn"]))
    counts = {"chapters": sum(1 for r in rows if r["level"] == 0), "arcs": sum(1 for r in rows if r["level"] > 0)}
    with transaction.atomic():
        existing = _rows_of(game_save)
        if existing == wanted:
            return DemoChaptersResult(outcome="unchanged", **counts)
        Chapter.objects.filter(game_save=game_save).delete()
        Chapter.objects.bulk_create([Chapter(game_save=game_save, **row) for row in wanted])
    return DemoChaptersResult(outcome="replaced" if existing else "created", **counts)


def chapters_recording_for(game_save: Save) -> dict[str, Any] | None:
    """Which model summarised the demo save's chapters, for that save only (None elsewhere, or without a file)."""
    provenance = provenance_read(CHAPTERS_PROVENANCE)
    if not provenance or provenance.get("save_id") != getattr(game_save, "save_id", None):
        return None
    text = chapters_text(provenance.get("chapters"))
    return {"text": "", "chapters_text": text} if text else None

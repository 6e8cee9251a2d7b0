"""Shared set-up for the benchmarks: a throw-away Django database and Chroma directory.

Each benchmark runs against a fresh SQLite database (migrated here) and a fresh embedded
Chroma directory under a temporary folder, so it never touches the studio's own data.
Run from the project root: `.venv/bin/python bench/<name>.py --help`.
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_LOCOMO = ROOT.parent / "shared" / "data" / "locomo"


def setup_django(workdir: str | None = None) -> str:
    """Configure Django on a temporary SQLite database; return the work directory."""
    workdir = workdir or tempfile.mkdtemp(prefix="axiom-bench-")
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DEBUG", "1")
    os.environ.setdefault("SECRET_KEY", "bench-only")
    os.environ["AXIOM_VAR_DIR"] = workdir
    os.environ["DATABASE_URL"] = f"sqlite:///{workdir}/bench.sqlite3"
    os.environ["CHROMA_PATH"] = os.path.join(workdir, "chroma")
    os.environ.pop("CHROMA_HOST", None)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")
    os.environ["DJANGO_SETTINGS_MODULE"] = "studio.settings"
    os.environ.setdefault("LOG_LEVEL", "WARNING")
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    return workdir


def report(results: dict, json_path: str = "") -> None:
    """Print each figure on its line; write them all to `json_path` when given."""
    import json

    for name, value in results.items():
        print(f"{name}: {value}")
    if json_path:
        Path(json_path).write_text(json.dumps(results, indent=2) + "\n")


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    index = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[index]


def summarize_ms(samples: list[float]) -> dict[str, float]:
    return {
        "p50": percentile(samples, 50) * 1000,
        "p95": percentile(samples, 95) * 1000,
        "mean": statistics.fmean(samples) * 1000 if samples else float("nan"),
    }


class Stopwatch:
    def __enter__(self):
        self.start = time.perf_counter()
        return self

    def __exit__(self, *exc):
        self.seconds = time.perf_counter() - self.start


def parse_meta_pairs(parser, pairs: list[str]) -> dict[str, str]:
    """Return {key: value} of `--meta KEY=VALUE` options (a Universe_Meta key to set before a run)."""
    meta = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            parser.error(f"--meta takes KEY=VALUE, not {pair!r}")
        meta[key.strip()] = value.strip()
    return meta


def locomo_save(conv: str, turns: list[dict], universe):
    """Write a LoCoMo conversation as a classic save in the game's shape (one utterance a turn,
    the session's date as the turn's story time, state key `date`) and embed its turns.

    `turns`: {turn_id, dia_id, text, date} in order. Returns the save (its current turn the last).
    """
    from studio.memory.vector import get_vector_memory
    from studio.world.models import Event, Save, StateCache

    game_save = Save.objects.create(universe=universe, name=f"LoCoMo {conv}", meta={})
    Event.objects.bulk_create(
        [Event(game_save=game_save, turn_id=t["turn_id"], player_input="", narrative=t["text"]) for t in turns]
    )
    StateCache.objects.bulk_create(
        [StateCache(game_save=game_save, turn_id=t["turn_id"], state={"date": t["date"]}) for t in turns]
    )
    Save.objects.filter(pk=game_save.pk).update(current_turn=len(turns))
    game_save.refresh_from_db()
    get_vector_memory().embed_chunks(
        game_save.save_id,
        [{"turn_id": t["turn_id"], "text": t["text"], "metadata_extra": {"dia_id": t["dia_id"]}} for t in turns],
    )
    return game_save

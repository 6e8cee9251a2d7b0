"""Record the chapters of the demo's living save: its chapters closed by the studio's rules, summarised on a real model.

The living save (studio/universes/demo/living/save.axiom-save.json, recorded by
bench/demo_living_record.py) was played before chapters existed, so it has none. This script
imports it into a throw-away database (as `load_demo` does), then replays, turn by turn, the
call `turn_append` makes after every turn (`chapter_after_turn`, in a transaction under the
save's row lock): a scene change (the state's `location`) or the turn limit closes the open
chapter, and every `chapters_per_arc` chapters roll up into an arc, by the universe's
Universe_Meta settings. The summary jobs run inline (`AXIOM_JOBS_EAGER`) through the studio's
own `summarize` operation, client, spend guard and call log, against the configured
OpenAI-compatible endpoint behind the recording pass-through (bench/llm_recorder.py).

Then it writes into `--out` (default studio/universes/demo/living/):
- `save.axiom-save.json`: the save exported again (every other section unchanged; it checks
  that), now with its `chapters` section, the summary jobs and their LLM calls;
- `llm-exchanges.jsonl`: the summary requests and answers appended to the living pipeline's;
- `provenance.json`: a `chapters` block (model, endpoint, dates, the prompt's hash and the
  code commit, settings, and per row its turns, why it closed, its status and its call).

Nothing is written when a summary failed, so the file never holds a half-recorded set.

`--save classic` does the same for the 48-turn classic save (`drowned-reach-demo`, loaded
from studio/universes/demo/save.jsonl as `load_demo` loads it) and writes into
studio/universes/demo/chapters/: `chapters.json` (the rows, as the save file's `chapters`
section holds them), `llm-exchanges.jsonl` and `provenance.json`; `load_demo` gives the
classic save these rows (`studio/saves/demo_chapters.py`).

    AXIOM_LLM_BASE_URL=http://127.0.0.1:8081/v1 AXIOM_LLM_MODEL=local AXIOM_LLM_TIMEOUT=300 \\
      AXIOM_LLM_MAX_TOKENS=768 AXIOM_LLM_STRUCTURED_MODES=json_object,text \\
      flock /tmp/llm.lock .venv/bin/python bench/demo_chapters_record.py \\
      --model-name "Qwen2.5-Coder-1.5B-Instruct (Q4_K_M GGUF)" --endpoint-kind "llama-cpp-python 0.3.36 server"
Not for CI: it needs a model (a few minutes on the local 1.5B one).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from demo_living_record import DEFAULT_OUT, SETTINGS_RECORDED, now_iso, write_json  # noqa: E402

CLASSIC_OUT = ROOT / "studio" / "universes" / "demo" / "chapters"
# Sections the replay may change; every other one must export exactly as recorded.
CHANGED_SECTIONS = ("chapters", "jobs", "llm_calls")


def code_commit() -> str:
    try:
        return subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return ""


def unchanged_elsewhere(recorded: dict, exported: dict) -> list[str]:
    """Return the sections (or the header) that differ from the recording outside CHANGED_SECTIONS."""
    problems = (
        []
        if {k: v for k, v in recorded.items() if k != "sections"}
        == {k: v for k, v in exported.items() if k != "sections"}
        else ["header"]
    )
    for name, section in recorded["sections"].items():
        if name in CHANGED_SECTIONS:
            before, after = section["items"], exported["sections"].get(name, {}).get("items", [])
            if after[: len(before)] != before:
                problems.append(f"{name} (the recorded items are not kept as they were)")
        elif exported["sections"].get(name) != section:
            problems.append(name)
    return problems


def replay_chapters(game_save, meta: dict) -> tuple[list, list[dict], int]:
    """Replay `chapter_after_turn` over the save's turns (summary jobs inline); return (rows, report, calls)."""
    from django.db import transaction

    from studio.memory.chapters.models import Chapter
    from studio.memory.chapters.selectors import chapter_settings
    from studio.memory.chapters.services import chapter_after_turn
    from studio.memory.models import Job, JobKind, LLMCall
    from studio.world.models import Save, StateCache

    config = chapter_settings(universe_meta=meta)
    print(f"{game_save.current_turn} turns; {config}", flush=True)
    for turn_id in range(1, game_save.current_turn + 1):
        t0 = time.perf_counter()
        with transaction.atomic():  # as turn_append calls it: in the append's transaction, the save locked
            locked = Save.objects.select_for_update().select_related("universe").get(pk=game_save.pk)
            state = StateCache.objects.filter(game_save=locked, turn_id=turn_id).values_list("state", flat=True).first()
            closed = chapter_after_turn(game_save=locked, turn_id=turn_id, state=state, universe_meta=meta)
        # The summary jobs ran on commit (eager): the chapter's, then the arc's once its parts have one.
        if closed is not None:
            print(
                f"turn {turn_id}: closed turns {closed.first_turn}-{closed.last_turn} ({closed.close_note}); "
                f"{time.perf_counter() - t0:.0f} s with its summary jobs",
                flush=True,
            )
    rows = list(Chapter.objects.filter(game_save=game_save).order_by("level", "first_turn"))
    jobs = {
        job.payload.get("chapter"): job
        for job in Job.objects.filter(game_save=game_save, kind=JobKind.SUMMARIZE_CHAPTER)
    }
    calls = {call.job_id: call for call in LLMCall.objects.filter(game_save=game_save, operation="summarize")}
    report = []
    for row in rows:
        job = jobs.get(row.pk)
        call = calls.get(job.pk) if job else None
        report.append(
            {
                "level": row.level,
                "first_turn": row.first_turn,
                "last_turn": row.last_turn,
                "closed_turn": row.closed_turn,
                "close_reason": row.close_reason,
                "close_note": row.close_note,
                "summary_status": row.summary_status,
                "summary_chars": len(row.summary),
                "job": f"{job.kind}:{job.status}" if job else "",
                "latency_ms": call.latency_ms if call else None,
                "prompt_tokens": call.prompt_tokens if call else None,
                "completion_tokens": call.completion_tokens if call else None,
            }
        )
        print(json.dumps(report[-1]), flush=True)
    return rows, report, len(calls)


def chapters_block(
    args, *, started_at: str, settings_seen: dict, meta: dict, rows, report, calls: int, exchanges: int, pipeline: str
) -> dict:
    """The provenance of a chapters recording: model, endpoint, dates, prompt, code, settings, rows."""
    from studio.memory.chapters import summarize
    from studio.memory.chapters.selectors import chapter_settings

    config = chapter_settings(universe_meta=meta)
    return {
        "model": args.model_name,
        "served_model_id": os.environ.get("AXIOM_LLM_MODEL", ""),
        "endpoint_kind": args.endpoint_kind,
        "recorded_from": started_at,
        "recorded_to": now_iso(),
        "operation": "summarize",
        "pipeline": pipeline,
        "script": "bench/demo_chapters_record.py",
        "prompt": {
            "source": "studio/memory/chapters/summarize.py (SYSTEM_PROMPT)",
            "sha256": hashlib.sha256(summarize.SYSTEM_PROMPT.encode("utf-8")).hexdigest(),
        },
        "code_commit": code_commit(),
        "settings": settings_seen,
        "chapter_settings": {
            "chapter_turns": config.turns_per_chapter,
            "chapters_per_arc": config.chapters_per_arc,
            "chapter_on_scene_change": config.on_scene_change,
            "chapter_min_turns": config.min_turns,
        },
        "counts": {
            "chapters": sum(1 for r in rows if r.level == 0),
            "arcs": sum(1 for r in rows if r.level > 0),
            "llm_calls": calls,
            "llm_exchanges": exchanges,
        },
        "rows": report,
    }


def record_classic(args, upstream: str) -> int:
    """Record the chapters of the classic 48-turn demo save into `args.out` (studio/universes/demo/chapters/)."""
    from living_quality import setup
    from llm_recorder import RecordingProxy

    out = Path(args.out)
    started_at = now_iso()
    with RecordingProxy(upstream) as proxy, tempfile.TemporaryDirectory(prefix="axiom-demo-chapters-") as workdir:
        setup(workdir, proxy.base_url)
        settings_seen = {name: os.environ.get(name, "") for name in SETTINGS_RECORDED}
        from studio.memory.chapters.models import SummaryStatus
        from studio.memory.chapters.timeline import COPIED_FIELDS
        from studio.universes.demo.loader import demo_load, demo_read

        loaded = demo_load(living=False, data=demo_read())
        game_save = loaded.game_save
        meta = loaded.universe.meta_values()
        rows, report, calls = replay_chapters(game_save, meta)
        if not rows or any(row.summary_status != SummaryStatus.DONE for row in rows):
            print("not every chapter has a summary: nothing written", file=sys.stderr)
            return 1
        exchanges = [exchange.as_dict() for exchange in proxy.exchanges]
        document = {
            "format": "axiom-demo-chapters",
            "format_version": 1,
            "save_id": game_save.save_id,
            "turns": game_save.current_turn,
            "items": [{name: getattr(row, name) for name in COPIED_FIELDS} for row in rows],
        }
        provenance = {
            "save_id": game_save.save_id,
            "model": args.model_name,
            "chapters": chapters_block(
                args,
                started_at=started_at,
                settings_seen=settings_seen,
                meta=meta,
                rows=rows,
                report=report,
                calls=calls,
                exchanges=len(exchanges),
                pipeline="chapter_after_turn replayed over the 48 turns of save.jsonl (as "
                "turn_append calls it) -> SUMMARIZE_CHAPTER jobs, run inline",
            ),
        }
    out.mkdir(parents=True, exist_ok=True)
    write_json(out / "chapters.json", document)
    return write_recording(out, exchanges=exchanges, provenance=provenance, rows=len(rows), mode="w")


def write_recording(out: Path, *, exchanges: list[dict], provenance: dict, rows: int, mode: str) -> int:
    """Write the exchanges (`mode` "a" appends to a recording's own) and the provenance into `out`."""
    with (out / "llm-exchanges.jsonl").open(mode, encoding="utf-8") as fh:
        for exchange in exchanges:
            fh.write(json.dumps(exchange, ensure_ascii=False, default=str) + "\n")
    write_json(out / "provenance.json", provenance)
    print(f"wrote {rows} rows, {len(exchanges)} exchanges into {out}", flush=True)
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--save",
        choices=("living", "classic"),
        default="living",
        help="living: the living demo save's file; classic: the 48-turn save (studio/universes/demo/chapters/)",
    )
    parser.add_argument("--out", default="", help="default: studio/universes/demo/living/ or .../chapters/")
    parser.add_argument("--model-name", required=True, help="the model as people know it (shown on the save page)")
    parser.add_argument(
        "--endpoint-kind", required=True, help="the server software, e.g. llama-cpp-python 0.3.36 server"
    )
    args = parser.parse_args()
    upstream = os.environ.get("AXIOM_LLM_BASE_URL", "").strip()
    if not upstream:
        print("set AXIOM_LLM_BASE_URL (and AXIOM_LLM_MODEL) to an OpenAI-compatible endpoint", file=sys.stderr)
        return 2
    if args.save == "classic":
        args.out = args.out or str(CLASSIC_OUT)
        return record_classic(args, upstream)
    out = Path(args.out or DEFAULT_OUT)
    recorded = json.loads((out / "save.axiom-save.json").read_text(encoding="utf-8"))
    provenance = json.loads((out / "provenance.json").read_text(encoding="utf-8"))

    from living_quality import setup
    from llm_recorder import RecordingProxy

    started_at = now_iso()
    with RecordingProxy(upstream) as proxy, tempfile.TemporaryDirectory(prefix="axiom-demo-chapters-") as workdir:
        setup(workdir, proxy.base_url)
        settings_seen = {name: os.environ.get(name, "") for name in SETTINGS_RECORDED}
        from studio.memory.chapters.models import SummaryStatus
        from studio.memory.models import LLMCall
        from studio.saves.demo_living import demo_living_load
        from studio.saves.portable.services import save_export
        from studio.universes.demo.loader import demo_load, demo_read

        loaded = demo_load(living=False, data=demo_read())
        game_save = demo_living_load(
            universe=loaded.universe, save_path=out / "save.axiom-save.json", provenance_path=out / "provenance.json"
        ).game_save
        meta = dict(game_save.universe.meta.values_list("key", "value"))
        rows, report, calls = replay_chapters(game_save, meta)
        if not rows or any(row.summary_status != SummaryStatus.DONE for row in rows):
            print("not every chapter has a summary: nothing written", file=sys.stderr)
            return 1
        export_bytes = save_export(game_save=game_save).file.read()
        exported = json.loads(export_bytes)
        problems = unchanged_elsewhere(recorded, exported)
        if problems:
            print(f"the export changed more than the chapters: {problems}; nothing written", file=sys.stderr)
            return 1
        summary_exchanges = [exchange.as_dict() for exchange in proxy.exchanges]
        # The save's totals (what load_demo imports); the chapters block below says what this run added.
        provenance["counts"]["llm_calls"] = LLMCall.objects.filter(game_save=game_save).count()
        provenance["counts"]["llm_exchanges"] += len(summary_exchanges)
        provenance["chapters"] = chapters_block(
            args,
            started_at=started_at,
            settings_seen=settings_seen,
            meta=meta,
            rows=rows,
            report=report,
            calls=calls,
            exchanges=len(summary_exchanges),
            pipeline="chapter_after_turn replayed over the recorded turns (as "
            "turn_append calls it) -> SUMMARIZE_CHAPTER jobs, run inline",
        )
    (out / "save.axiom-save.json").write_bytes(export_bytes)
    return write_recording(out, exchanges=summary_exchanges, provenance=provenance, rows=len(rows), mode="a")


if __name__ == "__main__":
    sys.exit(main())

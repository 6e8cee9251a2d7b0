"""The console's feedback on a real (slow) model: what a playtester sees while it works.

Not a test and never run in CI: it needs an OpenAI-compatible endpoint (`AXIOM_LLM_BASE_URL`,
`AXIOM_LLM_MODEL`, ...), e.g. `../shared/tools/local-llm start`. On a throw-away database it
loads the demo universe, creates a fresh *living* save and, through the Console's services:

1. narrates `--turns` turns (default 1) by streaming each alternative as the page does,
   recording what the panel shows: the elapsed time, the time to the first text and the
   tokens so far (every `--every` seconds), then accepts it;
2. Continue on the next draft (a second alternative extending the first), then Stop on a
   third after `--stop-after` seconds (the text kept, nothing appended);
3. waits (at most `--job-timeout` s) for the memory jobs, sampling the Jobs page's view of
   them (the running step and for how long, `Job.progress` / `step_seconds`);
4. prints every LLM call with its latency and its answer or error (what the job and turn
   pages show to a playtester), and what each memory layer holds.

    .venv/bin/python bench/console_try.py --json bench/data/console_try/<date>-<model>.json
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import setup_django  # noqa: E402

ACTIONS = ["look around", "read hesper's note", "go to reedmarket"]


def stream_with_feedback(alternative_id: int, *, every: float, stop_after: float | None, log) -> dict:
    """Stream one alternative as the page does; return what the feedback line showed."""
    from studio.saves.models import NarratorAlternative
    from studio.saves.narrator.services import narration_stop, narration_stream

    began = time.monotonic()
    first = None
    text = ""
    samples = []
    last = began
    stopped = False
    for delta in narration_stream(alternative_id=alternative_id):
        now = time.monotonic()
        if first is None and delta:
            first = now - began
        text += delta
        if now - last >= every:
            last = now
            line = f"{now - began:.1f} s elapsed · first text after {first:.1f} s · about {max(1, round(len(text) / 4))} tokens so far"
            samples.append(line)
            log("     " + line)
        if stop_after is not None and not stopped and now - began >= stop_after:
            stopped = narration_stop(alternative=NarratorAlternative.objects.get(pk=alternative_id), shown_text=text)
            log(f"     Stop pressed at {now - began:.1f} s")
    alternative = NarratorAlternative.objects.get(pk=alternative_id)
    return {
        "status": alternative.status,
        "elapsed_s": round(time.monotonic() - began, 1),
        "first_text_s": round(first, 1) if first is not None else None,
        "first_token_ms_recorded": alternative.first_token_ms,
        "completion_tokens": alternative.completion_tokens,
        "chars": len(alternative.text),
        "text": alternative.text[:300],
        "error": alternative.error,
        "feedback": samples,
        "stopped": stopped,
    }


def watch_jobs(game_save, *, timeout: float, every: float, log) -> list[str]:
    from studio.memory.models import Job, JobStatus

    seen = []
    deadline = time.monotonic() + timeout
    last_line = ""
    while time.monotonic() < deadline:
        active = list(Job.objects.filter(game_save=game_save, status__in=(JobStatus.QUEUED, JobStatus.RUNNING)))
        if not active:
            break
        running = [j for j in active if j.status == JobStatus.RUNNING]
        line = (
            "; ".join(
                f"#{j.pk} {j.get_kind_display()} turn {j.turn_id}: {j.progress}"
                + (
                    f" (this step {j.step_seconds:.0f} s, running {j.running_seconds:.0f} s)"
                    if j.step_seconds is not None
                    else ""
                )
                for j in running
            )
            or f"{len(active)} queued"
        )
        if line != last_line:
            seen.append(line)
            log("     " + line)
            last_line = line
        time.sleep(every)
    return seen


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=1)
    parser.add_argument("--max-tokens", type=int, default=160, help="the save's sampler override (keeps the try short)")
    parser.add_argument("--every", type=float, default=5.0)
    parser.add_argument("--stop-after", type=float, default=15.0)
    parser.add_argument("--job-timeout", type=float, default=600)
    parser.add_argument("--json")
    args = parser.parse_args()
    if not os.environ.get("AXIOM_LLM_BASE_URL"):
        parser.error("set AXIOM_LLM_BASE_URL (and AXIOM_LLM_MODEL) to an OpenAI-compatible endpoint")
    os.environ.pop("REDIS_URL", None)
    setup_django()

    from studio.memory.models import Fact, Job, LLMCall, MentalModel, Observation
    from studio.saves.models import NarratorDraft
    from studio.world.models import MemoryMode
    from studio.saves.narrator import play
    from studio.saves.narrator.play_settings import play_settings_update
    from studio.saves.narrator.services import narrator_accept, narrator_draft_create, narrator_regenerate
    from studio.saves.services import save_create
    from studio.universes.demo.loader import demo_load

    def log(message: str) -> None:
        print(message, flush=True)

    load = os.getloadavg()
    log(
        f"endpoint {os.environ['AXIOM_LLM_BASE_URL']} model {os.environ.get('AXIOM_LLM_MODEL', '')}; load {load[0]:.2f}"
    )
    universe = demo_load(living=False).universe
    game_save = save_create(universe=universe, name="Console try", memory_mode=MemoryMode.LIVING)
    play_settings_update(game_save=game_save, changes={"max_tokens": args.max_tokens})
    report: dict = {
        "model": os.environ.get("AXIOM_LLM_MODEL", ""),
        "load_start": load,
        "max_tokens": args.max_tokens,
        "turns": [],
    }
    started = time.monotonic()
    for action in ACTIONS[: args.turns]:
        log(f"narrate {action!r}")
        draft = narrator_draft_create(game_save=game_save, player_input=play.shape_action(action, "do"))
        row = {
            "action": draft.player_input,
            "narrate": stream_with_feedback(draft.alternatives.get().pk, every=args.every, stop_after=None, log=log),
        }
        draft = NarratorDraft.objects.get(pk=draft.pk)
        if args.turns == 1 or action == ACTIONS[args.turns - 1]:
            log("continue")
            alternative = play.narrator_continue(draft=draft)
            row["continue"] = stream_with_feedback(alternative.pk, every=args.every, stop_after=None, log=log)
            log("regenerate, then stop")
            alternative = narrator_regenerate(draft=NarratorDraft.objects.get(pk=draft.pk))
            row["stop"] = stream_with_feedback(alternative.pk, every=args.every, stop_after=args.stop_after, log=log)
        draft = NarratorDraft.objects.get(pk=draft.pk)
        accept_number = next((a.number for a in draft.alternatives.order_by("-number") if a.acceptable), None)
        if accept_number is None:
            log("nothing acceptable; stopping")
            break
        event = narrator_accept(draft=draft, number=accept_number)
        log(f"accepted turn {event.turn_id}; the memory jobs:")
        row["jobs_seen"] = watch_jobs(game_save, timeout=args.job_timeout, every=args.every, log=log)
        report["turns"].append(row)
    calls = []
    for call in LLMCall.objects.filter(game_save=game_save).order_by("created_at", "id"):
        calls.append(
            {
                "operation": call.operation,
                "latency_ms": call.latency_ms,
                "prompt_tokens": call.prompt_tokens,
                "completion_tokens": call.completion_tokens,
                "error": call.error,
                "answer": call.answer[:400],
                "request_chars": len(call.request),
            }
        )
        log(
            f"call {call.operation}: {call.latency_ms} ms, {call.completion_tokens} tokens, "
            f"{'error: ' + call.error if call.error else 'answer: ' + call.answer[:120].replace(chr(10), ' ')}"
        )
    report["calls"] = calls
    report["jobs"] = [
        {"kind": j.kind, "turn": j.turn_id, "status": j.status, "progress": j.progress, "seconds": j.duration_seconds}
        for j in Job.objects.filter(game_save=game_save).order_by("id")
    ]
    report["memory"] = {
        "facts": Fact.objects.filter(game_save=game_save).count(),
        "beliefs": Observation.objects.filter(game_save=game_save, deleted_turn_id__isnull=True).count(),
        "mental_models": MentalModel.objects.filter(game_save=game_save).count(),
    }
    report["total_s"] = round(time.monotonic() - started, 1)
    report["load_end"] = os.getloadavg()
    log(f"memory: {report['memory']}; total {report['total_s']} s")
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(report, indent=2, ensure_ascii=False, default=str), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""End to end on a real model: play a fresh living save through the narrator, rewind, play on.

Not a test and never run in CI: it needs an OpenAI-compatible endpoint given by the usual
variables (`AXIOM_LLM_BASE_URL`, `AXIOM_LLM_MODEL`, `AXIOM_LLM_TIMEOUT`, ...), for example the
local instrument `../shared/tools/local-llm start`. On a throw-away SQLite database and
embedded Chroma directory it:

1. loads the demo universe (no demo save embedding) and creates a fresh *living* save of it;
2. plays `--turns` turns (default 10) through the narrator exactly as the Console does:
   `narrator_draft_create` -> `narration_run` (the streamed call, TrackedLLM, spend guard,
   call log) -> `narrator_accept` (turn_append + the narrator snapshot), then waits until
   the turn's memory jobs (embedding, extract / consolidate / reflect) have settled;
3. rewinds to `--rewind-to` (default 5) with `CheckpointManager.rewind` and waits for the
   vector rollback;
4. plays `--more` turns (default 3) with different actions;

and after each step prints what exists (turns, facts, live beliefs, mental models, narrative
chunks, narrator snapshots, lore activation rows, LLM calls). After the rewind it checks
that nothing from the abandoned turns survives: no fact, chunk, snapshot or activation row
of a turn after N; no belief or model citing a dropped fact or belief; none of the dropped
rows' ids reappearing after the extra turns. Exit status 1 when a check fails.

    .venv/bin/python bench/e2e_narrator.py --json var/e2e.json
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import setup_django  # noqa: E402

# The demo's own first actions (turns 1-10), then three the demo never took (after the rewind).
ACTIONS = [
    "look around",
    "read hesper's note",
    "go to reedmarket",
    "ask corvin tull to lend me a diving helm",
    "buy the boy an eel pie and ask him to come with me",
    "go to the lantern slip and find dace",
    "sail west toward bellspire",
    "go on to bellspire and find brother anselm",
    "put on the brass helm and dive down the reeve's stair",
    "free hesper with the iron bar",
]
OTHER_ACTIONS = [
    "stay in reedmarket and ask around about the Verrows instead",
    "follow Mirela Verrow's clerk to the counting house",
    "hide in the rafters and listen to what the clerk reports",
]


def wait_for_jobs(game_save, *, timeout: float) -> dict[str, int]:
    from studio.memory.models import Job, JobStatus

    unsettled = (JobStatus.QUEUED, JobStatus.RUNNING)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not Job.objects.filter(game_save=game_save, status__in=unsettled).exists():
            break
        time.sleep(1.0)
    return dict(
        Counter(
            f"{kind}:{status}" for kind, status in Job.objects.filter(game_save=game_save).values_list("kind", "status")
        )
    )


def inventory(game_save, memory) -> dict:
    """What exists for the save now, with the ids needed to check a rewind."""
    from studio.memory.models import Fact, LLMCall, LoreActivation, MentalModel, Observation
    from studio.saves.models import NarratorSnapshot

    game_save.refresh_from_db()
    facts = list(Fact.objects.filter(game_save=game_save).values("id", "turn_id", "statement"))
    beliefs = list(
        Observation.objects.filter(game_save=game_save, deleted_turn_id__isnull=True).values(
            "id", "created_turn_id", "sources", "statement"
        )
    )
    models = list(MentalModel.objects.filter(game_save=game_save).values("id", "subject", "sources"))
    chunks = memory.get_chunks(game_save.save_id, chunk_type="narrative")
    return {
        "current_turn": game_save.current_turn,
        "timeline_generation": game_save.timeline_generation,
        "turns": game_save.events.count(),
        "facts": facts,
        "beliefs": beliefs,
        "models": models,
        "chunks": [{"id": c["id"], "turn_id": c["turn_id"]} for c in chunks],
        "snapshots": list(NarratorSnapshot.objects.filter(game_save=game_save).values("id", "turn_id")),
        "activations": list(LoreActivation.objects.filter(game_save=game_save).values_list("turn_id", flat=True)),
        "llm_calls": dict(Counter(LLMCall.objects.filter(game_save=game_save).values_list("operation", flat=True))),
    }


def summary(inv: dict) -> str:
    return (
        f"turn {inv['current_turn']} (generation {inv['timeline_generation']}): {inv['turns']} turns, "
        f"{len(inv['facts'])} facts, {len(inv['beliefs'])} live beliefs, {len(inv['models'])} mental models, "
        f"{len(inv['chunks'])} narrative chunks, {len(inv['snapshots'])} narrator snapshots, "
        f"{len(inv['activations'])} lore activation rows, LLM calls {inv['llm_calls']}"
    )


def source_ids(value) -> set[int]:
    """Ids named in a belief's / model's `sources` (a list of ids or of {"id": ...} dicts)."""
    out = set()
    for item in value or []:
        if isinstance(item, dict):
            for key in ("fact_id", "observation_id", "belief_id", "id"):
                if key in item:
                    out.add(int(item[key]))
                    break
        elif isinstance(item, int):
            out.add(item)
    return out


def play(game_save, actions, *, memory, job_timeout: float, log) -> list[dict]:
    from studio.saves.models import NarratorDraft
    from studio.saves.narrator.services import narration_run, narrator_accept, narrator_draft_create

    turns = []
    for action in actions:
        started = time.monotonic()
        draft = narrator_draft_create(game_save=game_save, player_input=action)
        alternative = narration_run(alternative_id=draft.alternatives.get().pk, vector_memory=memory)
        if not alternative.acceptable:
            raise SystemExit(f"narration failed for {action!r}: {alternative.status} {alternative.error}")
        narrated = time.monotonic() - started
        event = narrator_accept(draft=NarratorDraft.objects.get(pk=draft.pk))
        jobs = wait_for_jobs(game_save, timeout=job_timeout)
        row = {
            "turn": event.turn_id,
            "action": action,
            "narrate_s": round(narrated, 1),
            "jobs_s": round(time.monotonic() - started - narrated, 1),
            "completion_tokens": alternative.completion_tokens,
            "narrative": alternative.text[:160],
            "jobs": jobs,
        }
        log(
            f"  turn {event.turn_id}: narrated in {row['narrate_s']} s ({alternative.completion_tokens} tokens), "
            f"memory jobs {row['jobs_s']} s {jobs}"
        )
        turns.append(row)
    return turns


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=10)
    parser.add_argument("--rewind-to", type=int, default=5)
    parser.add_argument("--more", type=int, default=3)
    parser.add_argument("--job-timeout", type=float, default=3600, help="seconds to wait for one turn's memory jobs")
    parser.add_argument("--json", help="write the whole report here")
    args = parser.parse_args()
    if not os.environ.get("AXIOM_LLM_BASE_URL"):
        parser.error("set AXIOM_LLM_BASE_URL (and AXIOM_LLM_MODEL) to an OpenAI-compatible endpoint")
    if args.turns > len(ACTIONS) or args.more > len(OTHER_ACTIONS) or not 0 <= args.rewind_to < args.turns:
        parser.error(f"--turns <= {len(ACTIONS)}, --more <= {len(OTHER_ACTIONS)}, 0 <= --rewind-to < --turns")
    os.environ.pop("REDIS_URL", None)  # the in-process runner: jobs run in this process's pool
    setup_django()

    from studio.memory.vector import get_vector_memory
    from studio.saves.checkpoints import CheckpointManager
    from studio.world.models import MemoryMode, Save
    from studio.saves.services import save_create
    from studio.universes.demo.loader import demo_load

    def log(message: str) -> None:
        print(message, flush=True)

    load = os.getloadavg()
    log(
        f"endpoint {os.environ['AXIOM_LLM_BASE_URL']} model {os.environ.get('AXIOM_LLM_MODEL', '')}; "
        f"load {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}"
    )
    result = demo_load(living=False)
    memory = get_vector_memory()
    game_save = save_create(universe=result.universe, name="End to end (narrator)", memory_mode=MemoryMode.LIVING)
    wait_for_jobs(game_save, timeout=args.job_timeout)
    report: dict = {"model": os.environ.get("AXIOM_LLM_MODEL", ""), "load_start": load, "steps": []}

    log(f"1. play {args.turns} turns")
    played = play(game_save, ACTIONS[: args.turns], memory=memory, job_timeout=args.job_timeout, log=log)
    before = inventory(game_save, memory)
    log("   " + summary(before))
    report["steps"].append({"step": f"played {args.turns}", "turns": played, "inventory": before})

    n = args.rewind_to
    log(f"2. rewind to turn {n}")
    rewound = CheckpointManager().rewind(Save.objects.get(pk=game_save.pk), n)
    wait_for_jobs(game_save, timeout=args.job_timeout)
    after_rewind = inventory(game_save, memory)
    log(f"   counts {rewound.counts}")
    log("   " + summary(after_rewind))
    report["steps"].append({"step": f"rewound to {n}", "counts": rewound.counts, "inventory": after_rewind})

    log(f"3. play {args.more} other turns")
    more = play(game_save, OTHER_ACTIONS[: args.more], memory=memory, job_timeout=args.job_timeout, log=log)
    final = inventory(game_save, memory)
    log("   " + summary(final))
    report["steps"].append({"step": f"played {args.more} more", "turns": more, "inventory": final})

    # What the abandoned turns left, before and after the extra turns.
    dropped_facts = {f["id"] for f in before["facts"] if f["turn_id"] > n}
    dropped_beliefs = {b["id"] for b in before["beliefs"] if b["created_turn_id"] > n}
    dropped_snapshots = {s["id"] for s in before["snapshots"] if s["turn_id"] > n}
    checks = {
        "no fact of a turn after N survives the rewind": all(f["turn_id"] <= n for f in after_rewind["facts"]),
        "no narrative chunk after N survives the rewind": all(c["turn_id"] <= n for c in after_rewind["chunks"]),
        "no narrator snapshot after N survives the rewind": all(s["turn_id"] <= n for s in after_rewind["snapshots"]),
        "no lore activation row after N survives the rewind": all(t <= n for t in after_rewind["activations"]),
        "no live belief cites a dropped fact": all(
            not (source_ids(b["sources"]) & dropped_facts) for b in after_rewind["beliefs"] + final["beliefs"]
        ),
        "no belief created after N is live after the rewind": not (
            {b["id"] for b in after_rewind["beliefs"]} & dropped_beliefs
        ),
        "no mental model cites a dropped belief": all(
            not (source_ids(m["sources"]) & dropped_beliefs) for m in after_rewind["models"] + final["models"]
        ),
        "no dropped fact id reappears": not ({f["id"] for f in final["facts"]} & dropped_facts),
        "no narrative chunk beyond the new timeline": all(c["turn_id"] <= n + args.more for c in final["chunks"]),
        "no dropped snapshot reappears": not ({s["id"] for s in final["snapshots"]} & dropped_snapshots),
        "the extra turns were played": final["current_turn"] == n + args.more,
    }
    report["checks"] = checks
    report["load_end"] = os.getloadavg()
    log("checks:")
    for name, ok in checks.items():
        log(f"  {'ok  ' if ok else 'FAIL'} {name}")
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2, default=str), encoding="utf-8")
    return 0 if all(checks.values()) else 1


if __name__ == "__main__":
    sys.exit(main())

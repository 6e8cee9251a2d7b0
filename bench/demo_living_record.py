"""Record the demo's living save: the studio's own pipeline on a real model, over the demo turns.

Loads the demo universe into a throw-away database, creates a living save of it and appends
the first `--turns` turns of studio/universes/demo/save.jsonl one by one (turn_append, the
living jobs run inline: extraction, consolidation, reflection through the configured
OpenAI-compatible endpoint). Every HTTP exchange goes through the recording pass-through
(bench/llm_recorder.py). After each turn it writes, into `--out` (default
studio/universes/demo/living/):

- `save.axiom-save.json`: the save as a portable save file (`save_export`: turns, states,
  facts, beliefs with their history, mental models, jobs, the studio's LLM call log);
- `llm-exchanges.jsonl`: every request the studio sent and the model's answer, as received;
- `provenance.json`: model, endpoint kind, dates, settings, and the turns completed.

So a run stopped early leaves an honest record of the turns it completed. `load_demo`
imports the file (no LLM is called); the save page shows "recorded with <model> on <date>".

    eval "$(../shared/tools/local-llm start)"
    AXIOM_LLM_STRUCTURED_MODES=json_object,text AXIOM_LLM_TIMEOUT=900 \\
      .venv/bin/python bench/demo_living_record.py --turns 20 \\
      --model-name "Qwen2.5-Coder-1.5B-Instruct Q4_K_M" --endpoint-kind "llama-cpp-python 0.3.36 server"
Not for CI: a 1.5B model on 2 cores takes minutes per turn.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

DEFAULT_OUT = ROOT / "studio" / "universes" / "demo" / "living"
SETTINGS_RECORDED = (
    "AXIOM_LLM_MODEL",
    "AXIOM_LLM_TIMEOUT",
    "AXIOM_LLM_MAX_TOKENS",
    "AXIOM_LLM_STRUCTURED_MODES",
    "AXIOM_LLM_STREAM",
    "AXIOM_LLM_MAX_RETRIES",
)


def now_iso() -> str:
    return datetime.now(timezone.utc).replace(microsecond=0).isoformat()


def write_json(path: Path, data) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=20)
    parser.add_argument("--out", default=str(DEFAULT_OUT))
    parser.add_argument("--model-name", required=True, help="the model as people know it (shown on the save page)")
    parser.add_argument(
        "--endpoint-kind", required=True, help="the server software, e.g. llama-cpp-python 0.3.36 server"
    )
    args = parser.parse_args()
    upstream = os.environ.get("AXIOM_LLM_BASE_URL", "").strip()
    if not upstream:
        print("set AXIOM_LLM_BASE_URL (and AXIOM_LLM_MODEL) to an OpenAI-compatible endpoint", file=sys.stderr)
        return 2
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    from living_quality import setup
    from llm_recorder import RecordingProxy

    settings_seen = {name: os.environ.get(name, "") for name in SETTINGS_RECORDED}
    started_at = now_iso()
    with RecordingProxy(upstream) as proxy, tempfile.TemporaryDirectory(prefix="axiom-demo-living-") as workdir:
        setup(workdir, proxy.base_url)
        settings_seen.update({name: os.environ.get(name, "") for name in SETTINGS_RECORDED})
        from studio.memory.models import Fact, Job, LLMCall, MentalModel, Observation
        from studio.saves.portable.services import save_export
        from studio.saves.services import save_create, turn_append
        from studio.universes.demo.loader import demo_load, demo_read

        data = demo_read()
        loaded = demo_load(living=False, data=data)
        game_save = save_create(
            universe=loaded.universe, name="The Drowned Bells (living memory)", memory_mode="living"
        )
        turns = data.turns[: args.turns]
        completed: list[dict] = []
        for turn in turns:
            t0 = time.perf_counter()
            turn_append(
                game_save=game_save,
                player_input=turn["player_input"],
                narrative=turn["narrative"],
                state=turn["state"],
            )
            seconds = time.perf_counter() - t0
            game_save.refresh_from_db()
            jobs = list(Job.objects.filter(game_save=game_save, turn_id=turn["turn_id"]).values_list("kind", "status"))
            completed.append(
                {
                    "turn_id": turn["turn_id"],
                    "seconds": round(seconds, 1),
                    "facts": Fact.objects.filter(game_save=game_save, turn_id=turn["turn_id"]).count(),
                    "jobs": [f"{kind}:{status}" for kind, status in jobs],
                    "load_average": [round(x, 2) for x in os.getloadavg()],
                }
            )
            export = save_export(game_save=game_save)
            (out / "save.axiom-save.json").write_bytes(export.file.read())
            with (out / "llm-exchanges.jsonl").open("w", encoding="utf-8") as fh:
                for exchange in proxy.exchanges:
                    fh.write(json.dumps(exchange.as_dict(), ensure_ascii=False, default=str) + "\n")
            write_json(
                out / "provenance.json",
                {
                    "model": args.model_name,
                    "served_model_id": os.environ.get("AXIOM_LLM_MODEL", ""),
                    "endpoint_kind": args.endpoint_kind,
                    "recorded_from": started_at,
                    "recorded_to": now_iso(),
                    "turns_requested": len(turns),
                    "turns_recorded": len(completed),
                    "pipeline": "studio living pipeline (turn_append -> LIVING_TURN jobs: extract, consolidate, reflect)",
                    "script": "bench/demo_living_record.py",
                    "settings": settings_seen,
                    "counts": {
                        "facts": Fact.objects.filter(game_save=game_save).count(),
                        "beliefs": Observation.objects.filter(game_save=game_save).count(),
                        "mental_models": MentalModel.objects.filter(game_save=game_save).count(),
                        "llm_calls": LLMCall.objects.filter(game_save=game_save).count(),
                        "llm_exchanges": len(proxy.exchanges),
                    },
                    "turns": completed,
                },
            )
            print(
                f"turn {turn['turn_id']}: {seconds:.0f} s, {completed[-1]['facts']} facts, "
                f"jobs {completed[-1]['jobs']}, load {completed[-1]['load_average']}",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())

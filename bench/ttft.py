"""Time to first token of the narrator's prompts on a model server with a prefix cache.

A prompt that starts like the previous one is read from the server's key-value cache up to
the first differing token (llama.cpp, llama-cpp-python, Ollama, vLLM); the rest is read at the
model's prompt speed (~55-75 tokens/s for the local 1.5B model on 2 cores) before the first
word. Two steps, so the prompts of two versions of the studio are replayed on one server in
one run:

1. `--dump prompts.json`: play the demo's first `--turns` turns through a fresh classic save
   (the path of `bench/prompt_prefix.py`: `build_narrator_prompt`, then `turn_append` with the
   demo's narrative) and write each turn's system and user messages. Run it with each version
   of the code (e.g. from a worktree of an older commit, with this file copied there).
2. `--replay a.json b.json ...`: for each file in turn, send its prompts in order to the
   OpenAI-compatible server the AXIOM_LLM_* variables point at (streamed, one request at a
   time, `max_tokens` 8, temperature 0) and time the first streamed token. Before each file the
   cache is reset with an unrelated prompt, so the first turn of every file starts cold and
   each later turn finds only the previous turn's prompt in the cache, as in play.

Prints per turn the prompt tokens (as the server reports them, else the studio's estimate)
and the time to first token, and the
median over turns 2.. per file, with the ratio between files. Real model only (never in CI);
wrap in `flock /tmp/llm.lock` on a shared machine.

    .venv/bin/python bench/ttft.py --dump /tmp/after.json [--turns 10] [--meta context_reserve_recall=10]
    AXIOM_LLM_BASE_URL=... .venv/bin/python bench/ttft.py --replay /tmp/before.json /tmp/after.json --json out.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))


def dump(turns: int, path: str, meta: dict[str, str]) -> None:
    from _common import setup_django

    os.environ["AXIOM_JOBS_EAGER"] = "1"
    setup_django()
    from studio.saves.narrator.prompt import build_narrator_prompt
    from studio.saves.services import save_create, turn_append
    from studio.universes.demo.loader import demo_load, demo_read

    data = demo_read()
    loaded = demo_load(data=data)
    for key, value in meta.items():  # e.g. context_reserve_recall=10: the budget split to measure
        loaded.universe.meta.update_or_create(key=key, defaults={"value": value})
    game_save = save_create(universe=loaded.universe, name="ttft bench")
    prompts = []
    for turn in data.turns[:turns]:
        prompt = build_narrator_prompt(game_save=game_save, player_input=turn["player_input"])
        prompts.append(
            {
                "turn": prompt.turn_id,
                "system": prompt.system,
                "user": prompt.user,
                "tokens_estimate": prompt.tokens_estimate,
            }
        )
        turn_append(
            game_save=game_save,
            player_input=turn["player_input"],
            narrative=turn["narrative"],
            state=turn.get("state") or {},
        )
    Path(path).write_text(json.dumps({"prompts": prompts, "meta": meta}, indent=1))
    print(f"wrote {len(prompts)} prompts to {path}")


def first_token(client, url: str, model: str, system: str, user: str) -> tuple[float, int]:
    """Return (seconds to the first streamed token, prompt tokens the server reports)."""
    body = {
        "model": model,
        "stream": True,
        "max_tokens": 8,
        "temperature": 0,
        "stream_options": {"include_usage": True},
        "messages": [{"role": "system", "content": system}, {"role": "user", "content": user}],
    }
    started = time.perf_counter()
    first = None
    prompt_tokens = 0
    with client.stream("POST", url, json=body) as response:
        response.raise_for_status()
        for line in response.iter_lines():
            if not line.startswith("data:") or line.strip() == "data: [DONE]":
                continue
            chunk = json.loads(line[5:])
            if chunk.get("usage"):
                prompt_tokens = chunk["usage"].get("prompt_tokens", 0)
            choices = chunk.get("choices") or []
            if first is None and choices and (choices[0].get("delta") or {}).get("content"):
                first = time.perf_counter() - started
    return (first if first is not None else time.perf_counter() - started), prompt_tokens


def replay(paths: list[str], out: str | None) -> None:
    import httpx

    base = os.environ.get("AXIOM_LLM_BASE_URL", "").rstrip("/")
    if not base:
        sys.exit("AXIOM_LLM_BASE_URL is not set (../shared/tools/local-llm start prints it)")
    model = os.environ.get("AXIOM_LLM_MODEL", "local")
    url = base + "/chat/completions"
    results = {}
    with httpx.Client(timeout=float(os.environ.get("AXIOM_LLM_TIMEOUT", "300"))) as client:
        for path in paths:
            prompts = json.loads(Path(path).read_text())["prompts"]
            first_token(client, url, model, "Reset.", "Say OK.")  # nothing of the next prompt in the cache
            rows = []
            for prompt in prompts:
                seconds, tokens = first_token(client, url, model, prompt["system"], prompt["user"])
                # llama-cpp-python sends no usage in a stream: the studio's estimate stands in
                tokens = tokens or prompt.get("tokens_estimate") or (len(prompt["system"]) + len(prompt["user"])) // 4
                rows.append({"turn": prompt["turn"], "ttft_s": round(seconds, 2), "prompt_tokens": tokens})
                print(
                    f"{Path(path).name} turn {prompt['turn']}: {tokens} prompt tokens, first token after {seconds:.1f} s",
                    flush=True,
                )
            results[path] = rows
    print("\n| prompts | turns | median TTFT, turns 2.. (s) | mean prompt tokens |")
    print("|---|---|---|---|")
    medians = {}
    for path, rows in results.items():
        later = [r["ttft_s"] for r in rows[1:]] or [r["ttft_s"] for r in rows]
        medians[path] = statistics.median(later)
        print(
            f"| {Path(path).name} | {len(rows)} | {medians[path]:.1f} | {statistics.mean(r['prompt_tokens'] for r in rows):.0f} |"
        )
    if len(paths) > 1:
        first = medians[paths[0]]
        for path in paths[1:]:
            print(
                f"{Path(path).name} / {Path(paths[0]).name}: {medians[path] / first:.2f}x the median time to first token"
            )
    if out:
        Path(out).write_text(
            json.dumps(
                {
                    "model": model,
                    "base_url": base,
                    "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                    "load": os.getloadavg(),
                    "results": results,
                    "medians": medians,
                },
                indent=1,
            )
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--turns", type=int, default=10, help="demo turns to dump (default 10)")
    parser.add_argument("--dump", metavar="FILE", help="write this code's narrator prompts for the demo's turns")
    parser.add_argument(
        "--replay", nargs="+", metavar="FILE", help="time the first token of each file's prompts, in order"
    )
    parser.add_argument("--json", help="with --replay: write the rows to this file")
    parser.add_argument(
        "--meta",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="with --dump: a Universe_Meta key of the demo universe to set before play (repeatable)",
    )
    args = parser.parse_args()
    if bool(args.dump) == bool(args.replay):
        parser.error("give --dump FILE or --replay FILE [FILE ...]")
    if args.dump:
        from _common import parse_meta_pairs

        dump(args.turns, args.dump, parse_meta_pairs(parser, args.meta))
    else:
        replay(args.replay, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""How much of each turn's narrator prompt a model server's prefix cache can reuse.

llama.cpp (`--cache-reuse` / its slot cache), Ollama and vLLM keep the key-value cache of the
previous request; a new prompt that starts with the same text is read from the cache up to
the first differing character, and hosted APIs bill a cached prefix at a discount. This
bench plays the demo's turns through a fresh *classic* save of the demo universe (the
Console's path: `build_narrator_prompt` for the turn's action, then `turn_append` with the
demo's narrative and state, its jobs run inline so the turn is embedded before the next
prompt), and for every turn after the first prints:

- the share of the prompt (system + user message, as a chat template concatenates them)
  that is a prefix of the previous turn's prompt, in characters; the median is the figure
  (`studio.saves.narrator.prefix.prefix_share`, what the snapshot page "What the narrator saw
  at turn N" shows too);
- the tokens of the memory context that repeat a turn the prompt also shows as a recent
  turn ("duplicated recent turns": the same narrative read twice).

No model is called: the prompts are what the narrator would be sent. Deterministic for a
given embedding model (the real MiniLM the studio uses).

    .venv/bin/python bench/prompt_prefix.py [--turns 16] [--json bench/data/prompt_prefix.json] [--budget 3000]
        [--meta context_cap_recall=10 --meta context_share_chapter=85]

`--meta key=value` sets a Universe_Meta key of the demo universe before play (the budget's
split: `context_cap_recall`, the cache-first layout, trades recall for a longer shared prefix;
docs/long-play.md). `--budget` replaces the narrator's memory budget (2,000 tokens).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import parse_meta_pairs, setup_django  # noqa: E402


def duplicated_tokens(prompt) -> int:
    """Tokens of memory items that are narrative of a turn the prompt also shows in full."""
    shown = getattr(prompt, "shown_turns", None)
    if shown is None:  # the old prompt: the last four turns, always
        shown = range(max(prompt.turn_id - 4, 1), prompt.turn_id)
    shown = set(shown)
    total = 0
    for item in prompt.memory.included:
        if item.layer == "narrative" and item.ref.get("turn_id") in shown:
            total += item.tokens
    return total


def play(turns: int, meta: dict[str, str] | None = None, budget: int | None = None) -> list[dict]:
    from studio.saves.narrator.prefix import prefix_share
    from studio.saves.narrator.prompt import CONFIG, NarratorConfig, build_narrator_prompt
    from studio.saves.services import save_create, turn_append
    from studio.universes.demo.loader import demo_load, demo_read

    data = demo_read()
    loaded = demo_load(data=data)
    for key, value in (meta or {}).items():
        loaded.universe.meta.update_or_create(key=key, defaults={"value": value})
    game_save = save_create(universe=loaded.universe, name="prompt prefix bench")
    rows = []
    previous = None  # the previous turn's prompt (system, user)
    for turn in data.turns[:turns]:
        prompt = build_narrator_prompt(
            game_save=game_save,
            player_input=turn["player_input"],
            config=NarratorConfig(token_budget=budget) if budget else CONFIG,
        )
        previous_system, previous_user = previous or ("", "")
        share = prefix_share(
            system=prompt.system, user=prompt.user, previous_system=previous_system, previous_user=previous_user
        )
        rows.append(
            {
                "turn": prompt.turn_id,
                "chars": share.total_chars,
                "tokens_estimate": prompt.tokens_estimate,
                "shared_prefix_chars": share.shared_chars if previous else 0,
                "shared_share": round(share.share, 4) if previous else None,
                "duplicated_recent_tokens": duplicated_tokens(prompt),
                "memory_tokens": prompt.memory.used_tokens,
            }
        )
        previous = (prompt.system, prompt.user)
        turn_append(
            game_save=game_save,
            player_input=turn["player_input"],
            narrative=turn["narrative"],
            state=turn.get("state") or {},
        )
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--turns", type=int, default=16, help="how many of the demo's turns to play (default 16)")
    parser.add_argument("--json", help="write the per-turn rows to this file")
    parser.add_argument(
        "--budget", type=int, help="the narrator's memory budget in tokens (default: the narrator's own)"
    )
    parser.add_argument(
        "--meta",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a Universe_Meta key of the demo universe to set before play (repeatable)",
    )
    args = parser.parse_args()
    meta = parse_meta_pairs(parser, args.meta)
    os.environ["AXIOM_JOBS_EAGER"] = "1"  # each turn's embedding runs inline, before the next prompt
    setup_django()
    rows = play(args.turns, meta, args.budget)
    shares = [r["shared_share"] for r in rows if r["shared_share"] is not None]
    print("| turn | prompt chars | ~tokens | shared prefix | share | duplicated recent-turn tokens | memory tokens |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        share = "-" if r["shared_share"] is None else f"{r['shared_share']:.0%}"
        print(
            f"| {r['turn']} | {r['chars']} | {r['tokens_estimate']} | {r['shared_prefix_chars']} | {share} | "
            f"{r['duplicated_recent_tokens']} | {r['memory_tokens']} |"
        )
    duplicated = [r["duplicated_recent_tokens"] for r in rows]
    print(
        f"\nturns {len(rows)}: median shared prefix {statistics.median(shares):.1%} "
        f"(min {min(shares):.1%}, max {max(shares):.1%}); duplicated recent-turn tokens: "
        f"total {sum(duplicated)}, max {max(duplicated)} in one prompt; "
        f"naive (no cache) re-reads 100% of every prompt."
    )
    if args.json:
        Path(args.json).write_text(
            json.dumps(
                {"turns": rows, "median_shared": statistics.median(shares), "meta": meta, "budget": args.budget},
                indent=1,
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())

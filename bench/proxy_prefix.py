"""What a model server re-reads per request through the memory proxy, against the same chat without it.

A prefix cache (llama.cpp's slot cache, Ollama, vLLM; a hosted API's cached-prefix price)
reuses the longest prefix a request shares with the previous one; the rest is read anew
before the first word. This bench plays the demo's turns (`--exchanges`, default 30) as a
SillyTavern chat: each request is built in SillyTavern's Chat Completion shape (its
`public/scripts/openai.js`, `populateChatCompletion` with the Prompt Manager's default order:
the main prompt, the character's description and scenario as system messages, the persona,
"[Start a new Chat]", the greeting, the chat history as user / assistant messages, then the
post-history instructions; no World Info, which the studio's lore replaces) and sent through
`proxy_prepare` (the proxy's own path: the sync that appends the previous exchange to a
*classic* save of the demo universe, the memory context, its placement); the relayed body is
what the model would read. No model is called: the previous exchange's answer is the demo's
narrative, which the next request's chat carries.

Each request's messages are laid out as a chat template lays them out (ChatML: `<|im_start|>role\\n
content<|im_end|>\\n`, the local Qwen model's), and the characters after the prefix it shares
with the previous request are what a prefix cache re-reads. The figure is the ratio of the
mean re-read characters with the proxy to the same chat sent without it (the front end alone),
per placement of the memory:

- `split` (the default, `proxy_memory_placement`): what stays the same from one request to the
  next after the system prompts, what changes with each request as a note after the chat's
  last message; the recent turns the chat carries are left out of the memory;
- `note`: the whole memory as that note;
- `system`: the whole memory after the system prompts (before this issue: the default);
- `marker`: `{{axiom_memory}}` in the main prompt (what docs/proxy.md suggested before).

Deterministic for a given embedding model (the real MiniLM the studio uses).

    .venv/bin/python bench/proxy_prefix.py [--exchanges 30] [--placements split,note,system,marker]
        [--json bench/data/proxy_prefix.json] [--meta KEY=VALUE ...]
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

MAIN = (
    "Write {{char}}'s next reply in a fictional chat between {{char}} and {{user}}. Write 1 reply only, in the "
    "second person, addressed to {{user}}. Always stay in character and avoid repetition."
)
MARKER = "{{axiom_memory}}"
NEW_CHAT = "[Start a new Chat]"
POST_HISTORY = "[Stay in the scene; do not speak or act for {{user}}.]"


def sillytavern_body(
    *, char: str, user: str, description: str, scenario: str, greeting: str, chat, pending: str, marker: bool
) -> dict:
    """One SillyTavern Chat Completion request (Custom OpenAI-compatible source) for `pending` after `chat`."""
    main = MAIN + (f"\n{MARKER}" if marker else "")
    messages = [
        {"role": "system", "content": main.replace("{{char}}", char).replace("{{user}}", user)},
        {"role": "system", "content": description},
        {"role": "system", "content": f"[Circumstances and context of the dialogue: {scenario}]"},
        {"role": "system", "content": NEW_CHAT},
        {"role": "assistant", "content": greeting},
    ]
    for player_input, answer in chat:
        messages += [{"role": "user", "content": player_input}, {"role": "assistant", "content": answer}]
    messages.append({"role": "user", "content": pending})
    messages.append({"role": "system", "content": POST_HISTORY.replace("{{user}}", user)})
    return {
        "model": "local",
        "messages": messages,
        "temperature": 1,
        "max_tokens": 300,
        "stream": True,
        "presence_penalty": 0,
        "frequency_penalty": 0,
        "top_p": 1,
    }


def chatml(messages: list[dict]) -> str:
    """The messages as a ChatML chat template lays them out (what the server's prefix cache compares)."""
    return "".join(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in messages)


def reread(previous: str | None, text: str) -> int:
    """Characters of `text` after the prefix it shares with `previous` (all of it for the first request)."""
    from studio.saves.narrator.prefix import common_prefix_length

    return len(text) - (common_prefix_length(previous, text) if previous is not None else 0)


def play(exchanges: int, placement: str, meta: dict[str, str]) -> list[dict]:
    """Play the demo's first `exchanges` turns through the proxy with `placement`; one row per request."""
    from studio.memory.recall.macros import macro_names_from_meta, play_meta
    from studio.proxy.services import proxy_prepare
    from studio.world.models import Save
    from studio.saves.services import save_create
    from studio.universes.demo.loader import demo_load, demo_read

    data = demo_read()
    universe = demo_load(data=data).universe
    for key, value in {**meta, "proxy_memory_placement": placement if placement != "marker" else "split"}.items():
        universe.meta.update_or_create(key=key, defaults={"value": value})
    game_save = save_create(universe=universe, name=f"proxy prefix {placement}")
    names = macro_names_from_meta(play_meta(universe=universe, save=game_save))
    user, char = names.user or "You", "the narrator"
    description = "The narrator of The Drowned Reach: a drowned country of stilt-towns, salvage divers and old debts."
    scenario = "A salvage apprentice searches for her missing mentor."
    greeting = "Grey dawn leaks through the shutters. The tide is turning."
    rows, previous, previous_plain, chat = [], None, None, []
    for turn in data.turns[:exchanges]:
        body = sillytavern_body(
            char=char,
            user=user,
            description=description,
            scenario=scenario,
            greeting=greeting,
            chat=chat,
            pending=turn["player_input"],
            marker=placement == "marker",
        )
        plain = chatml(
            sillytavern_body(
                char=char,
                user=user,
                description=description,
                scenario=scenario,
                greeting=greeting,
                chat=chat,
                pending=turn["player_input"],
                marker=False,
            )["messages"]
        )
        prepared = proxy_prepare(game_save=Save.objects.get(pk=game_save.pk), body=body, upstream_model="local")
        text = chatml(prepared.body["messages"])
        rows.append(
            {
                "exchange": len(chat) + 1,
                "placed": prepared.placed,
                "chars": len(text),
                "reread": reread(previous, text),
                "plain_chars": len(plain),
                "plain_reread": reread(previous_plain, plain),
                "memory_tokens": prepared.memory.used_tokens if prepared.memory else 0,
            }
        )
        previous, previous_plain = text, plain
        chat.append((turn["player_input"], turn["narrative"]))
    return rows


def summary(rows: list[dict]) -> dict:
    later = rows[1:]  # the first request reads everything either way
    proxied = statistics.fmean(r["reread"] for r in later)
    plain = statistics.fmean(r["plain_reread"] for r in later)
    return {
        "mean_reread": round(proxied),
        "mean_plain_reread": round(plain),
        "ratio": round(proxied / plain, 2),
        "median_reread": statistics.median(r["reread"] for r in later),
        "median_plain_reread": statistics.median(r["plain_reread"] for r in later),
        "max_reread": max(r["reread"] for r in later),
        "mean_chars": round(statistics.fmean(r["chars"] for r in later)),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--exchanges", type=int, default=30)
    parser.add_argument("--placements", default="split,note,system,marker")
    parser.add_argument("--json", help="write the per-request rows to this file")
    parser.add_argument(
        "--meta",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a Universe_Meta key of the demo universe to set before play (repeatable)",
    )
    args = parser.parse_args()
    meta = parse_meta_pairs(parser, args.meta)
    os.environ["AXIOM_JOBS_EAGER"] = "1"  # each appended turn is embedded before the next request
    os.environ.pop("AXIOM_LLM_BASE_URL", None)  # no model: nothing is relayed, no memory job runs
    setup_django()
    results = {}
    for placement in [p.strip() for p in args.placements.split(",") if p.strip()]:
        from studio.world.models import Universe

        Universe.objects.filter(slug="the-drowned-reach").delete()  # each placement plays a fresh demo universe
        rows = play(args.exchanges, placement, meta)
        results[placement] = {"rows": rows, **summary(rows)}
    print(
        f"{args.exchanges} exchanges of the demo in SillyTavern's request shape, load "
        f"{', '.join(f'{x:.1f}' for x in os.getloadavg())}; characters re-read per request (after the prefix shared "
        "with the previous request), mean over requests 2..N.\n"
    )
    print(
        "| placement | re-read with the proxy (mean) | median | max | without the proxy (mean) | ratio | request chars (mean) |"
    )
    print("|---|---|---|---|---|---|---|")
    for placement, r in results.items():
        print(
            f"| {placement} | {r['mean_reread']:,} | {r['median_reread']:,.0f} | {r['max_reread']:,} | "
            f"{r['mean_plain_reread']:,} | {r['ratio']:.2f}x | {r['mean_chars']:,} |"
        )
    if args.json:
        Path(args.json).write_text(
            json.dumps({"exchanges": args.exchanges, "meta": meta, "results": results}, indent=1)
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Named time on LoCoMo: does a question that names a time find more of its evidence with the temporal arm?

LoCoMo (../shared/data/locomo, never copied into the repository) in the game's shape, as
bench/memory_qa.py plays it: one conversation = one classic save, one utterance = one turn
(narrative "Speaker: text" plus "[shares a photo: caption]"), the session's date as the
turn's story time (state key `date`, LoCoMo's "1:56 pm on 8 May, 2023"), the save as of the
end of the conversation (so "last year" counts back from the last session's date). Embedded
with the real MiniLM the studio ships.

Every question of categories 1-4 is searched through `memory_search` (the studio's one
search path: the narrator's context and the search page both take it), narrative only, and
scored by the share of its annotated evidence utterances found
- in the top 10 results (R@10), and
- in the results taken in rank order while they fit `--budget` tokens (default 1,500, the
  narrator's budget; each result counted as the context prints it, "(turn N) text").
Arms, in the same run on the same saves:
- **with the arm**: the default `RetrievalConfig` (the temporal arm at `temporal_weight` 2,
  skipped when the named time holds more than `temporal_max_share` = half the chunks);
- **without**: the same with "temporal" taken out of `RetrievalConfig.arms`;
- **weight 1**: the arm at `temporal_weight` 1;
- **no width limit**: the arm at weight 2 however much of the save the named time holds;
- **boost**: the alternative design, no arm: the results without the arm (the same top 80), with
  `--boost` added to the fused score of the chunks inside the named time, re-sorted (a boost
  only reorders what the other arms found).
Questions that name no time must come out identical with and without the arm; the bench
counts any that do not (it must print 0). For the questions that name a time, the narrator's
own memory context (`next_turn_context`, token budget `--budget`, the question as the action)
is scored too, with and without the arm: the share of the evidence among its narrative items
and the turns it shows in full.

Reported: how many questions name a time, per category (category 5, adversarial, counted
but not scored: its evidence belongs to the other speaker), how many of those the arm ran for
(some chunks inside the named time, at most half), and the evidence shares for (a) the questions
that name a time, per category, (b) LoCoMo's temporal category (2), all of its questions, and
(c) every question.

`--latency` adds, for the last conversation, the median time of a search (k = 40, caches
warm: each question asked twice, the second timed) naming a time with and without the arm,
and naming none.

    .venv/bin/python bench/temporal_qa.py [--convs 26,30,41,42,43] [--budget 1500] [--json out.json] [--latency]
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from collections import defaultdict
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import DEFAULT_LOCOMO, locomo_save, setup_django  # noqa: E402

EVIDENCE = re.compile(r"D\s*:?\s*(\d+)\s*:\s*(\d+)")
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}
SCORED = (1, 2, 3, 4)
ARMS = ("without", "with the arm", "weight 1", "no width limit", "boost")
VARIANTS = ("weight 1", "no width limit")
SEARCH_K = 80


def load(path: Path) -> dict:
    """Return the conversation's turns (one per utterance) and its questions with evidence that exists."""
    data = json.loads(path.read_text(encoding="utf-8"))
    turns, number = [], 1
    while f"session_{number}" in data:
        date = data.get(f"session_{number}_date_time", "")
        for utterance in data[f"session_{number}"]:
            text = f"{utterance['speaker']}: {utterance['text']}"
            if utterance.get("blip_caption"):
                text += f" [shares a photo: {utterance['blip_caption']}]"
            turns.append({"turn_id": len(turns) + 1, "dia_id": utterance["dia_id"], "text": text, "date": date})
        number += 1
    known = {t["dia_id"] for t in turns}
    questions = []
    for qa in data["qa"]:
        evidence = sorted(
            {f"D{a}:{b}" for item in qa.get("evidence", []) for a, b in EVIDENCE.findall(str(item))} & known
        )
        if evidence and qa.get("category") in CATEGORIES:
            questions.append({"question": qa["question"], "category": qa["category"], "evidence": evidence})
    return {"turns": turns, "questions": questions}


def build_save(conv: str, conversation: dict, universe):
    """The conversation as a classic save, dated by session, embedded with the real MiniLM (`_common.locomo_save`)."""
    return locomo_save(conv, conversation["turns"], universe)


def shares(
    ranked_turns: list[int], wanted: set[str], dia: dict[int, str], text: dict[int, str], budget: int, count_tokens
) -> tuple[float, float]:
    """Evidence share in the top 10 and in the results that fit `budget` tokens."""
    top = {dia[t] for t in ranked_turns[:10]}
    taken, used = set(), 0
    for turn in ranked_turns:
        tokens = count_tokens(f"(turn {turn}) {text[turn]}")
        if used + tokens <= budget:
            taken.add(dia[turn])
            used += tokens
    return len(wanted & top) / len(wanted), len(wanted & taken) / len(wanted)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", default=str(DEFAULT_LOCOMO))
    parser.add_argument("--convs", default="26,30,41,42,43")
    parser.add_argument("--budget", type=int, default=1500)
    parser.add_argument("--boost", type=float, default=0.02, help="the boost alternative's addition to the RRF score")
    parser.add_argument("--json", help="write per-question rows to this file")
    parser.add_argument("--latency", action="store_true", help="time the searches of the last conversation")
    args = parser.parse_args()
    setup_django()
    from studio.memory.embeddings.tokens import count_tokens
    from studio.memory.recall.context import next_turn_context
    from studio.memory.recall.query_params import ContextParams
    from studio.memory.recall.search import memory_search
    from studio.memory.recall.temporal import time_preference
    from studio.memory.vector import get_vector_memory
    from studio.world.models import Universe

    vm = get_vector_memory()
    default = vm.config
    configs = {
        "without": replace(default, arms=tuple(a for a in default.arms if a != "temporal")),
        "with the arm": default,
        "weight 1": replace(default, temporal_weight=1.0),
        "no width limit": replace(default, temporal_max_share=1.0),
    }
    named_count, ran_count, total_count = defaultdict(int), defaultdict(int), defaultdict(int)
    scores = defaultdict(lambda: defaultdict(list))  # (group, arm) -> category -> [(r10, fill)]
    rows, differing, started = [], 0, time.perf_counter()
    for conv in args.convs.split(","):
        conversation = load(Path(args.data) / f"{conv}.json")
        universe = Universe.objects.create(name=f"LoCoMo {conv}", slug=f"locomo-{conv}")
        game_save = build_save(conv, conversation, universe)
        dia = {t["turn_id"]: t["dia_id"] for t in conversation["turns"]}
        text = {t["turn_id"]: t["text"] for t in conversation["turns"]}
        print(f"conversation {conv}: {len(text)} turns, {len(conversation['questions'])} questions", file=sys.stderr)
        for q in conversation["questions"]:
            category = q["category"]
            total_count[category] += 1
            prefer = time_preference(game_save=game_save, query_text=q["question"], horizon=game_save.current_turn)
            named = prefer is not None
            named_count[category] += named
            ran = named and 0 < len(prefer.turns) <= default.temporal_max_share * len(text)
            ran_count[category] += ran
            if category not in SCORED:
                continue
            ranked: dict[str, list[int]] = {}
            fused: dict[str, list[tuple[int, float]]] = {}
            for arm, config in configs.items():
                if not named and arm in VARIANTS:
                    continue
                vm.set_config(config)
                outcome = memory_search(
                    game_save=game_save, query_text=q["question"], k=SEARCH_K, exclude_chunk_type="lore"
                )
                fused[arm] = [(r["turn_id"], r["score"]) for r in outcome.results]
                ranked[arm] = [t for t, _ in fused[arm]]
            vm.set_config(default)
            if named:
                for arm in ("without", "with the arm"):
                    vm.set_config(configs[arm])
                    context = next_turn_context(
                        game_save=game_save, params=ContextParams(query_text=q["question"], token_budget=args.budget)
                    )
                    seen = {i.ref.get("turn_id") for i in context.included if i.layer == "narrative"} | set(
                        context.shown_turns
                    )
                    found = {dia[t] for t in seen if t in dia} & set(q["evidence"])
                    scores[("context", arm)][category].append((0.0, len(found) / len(q["evidence"])))
                vm.set_config(default)
            if not named:
                differing += ranked["without"] != ranked["with the arm"]
                for arm in (*VARIANTS, "boost"):
                    ranked[arm] = ranked["without"]
            else:
                inside = prefer.turns
                boosted = sorted(
                    enumerate(fused["without"]),
                    key=lambda item: (-(item[1][1] + (args.boost if item[1][0] in inside else 0.0)), item[0]),
                )
                ranked["boost"] = [turn for _, (turn, _score) in boosted]
            row = {
                "conv": conv,
                "category": category,
                "question": q["question"],
                "named": named,
                "ran": ran,
                "named_time": prefer.note if named else "",
            }
            for arm in ARMS:
                pair = shares(ranked[arm], set(q["evidence"]), dia, text, args.budget, count_tokens)
                row[arm] = [round(v, 3) for v in pair]
                groups = ["all", *(["named"] if named else []), *(["ran"] if ran else [])]
                for group in groups:
                    scores[(group, arm)][category].append(pair)
            rows.append(row)
    elapsed = time.perf_counter() - started
    report(args, scores, named_count, ran_count, total_count, differing, elapsed)
    if args.latency:
        latency(
            game_save,
            [row["question"] for row in rows if row["conv"] == conv and row["named"]],
            [row["question"] for row in rows if row["conv"] == conv and not row["named"]],
            configs,
        )
    if args.json:
        Path(args.json).write_text(json.dumps({"budget": args.budget, "convs": args.convs, "rows": rows}, indent=0))
    return 0


def latency(game_save, named: list[str], plain: list[str], configs: dict) -> None:
    """Print the median search time (warm) for questions naming a time, with and without the arm, and naming none."""
    from statistics import median

    from studio.memory.recall.search import memory_search
    from studio.memory.vector import get_vector_memory

    vm = get_vector_memory()
    plain = plain[: len(named)]
    for label, questions, arm in (
        ("naming a time, without the arm", named, "without"),
        ("naming a time, with the arm", named, "with the arm"),
        ("naming no time", plain, "with the arm"),
    ):
        vm.set_config(configs[arm])
        timings = []
        for question in questions * 2:
            start = time.perf_counter()
            memory_search(game_save=game_save, query_text=question, k=40, exclude_chunk_type="lore")
            timings.append((time.perf_counter() - start) * 1000)
        print(
            f"search latency, {label}: median {median(timings[len(questions) :]):.1f} ms (n={len(questions)}, "
            f"{game_save.current_turn} turns)"
        )
    vm.set_config(configs["with the arm"])


def mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else float("nan")


def report(args, scores, named_count, ran_count, total_count, differing, elapsed) -> None:
    print(
        f"\nLoCoMo conversations {args.convs}, one utterance a turn dated by its session, as of the end; "
        f"budget {args.budget} tokens; {elapsed:.0f} s."
    )
    print("\nQuestions that name a time (the parser fires) / the arm ran (some chunks inside, at most half) / all:")
    for category, name in CATEGORIES.items():
        print(f"  {category} {name}: {named_count[category]} / {ran_count[category]} / {total_count[category]}")
    print(f"Questions naming no time whose results differ with the arm: {differing} (must be 0)\n")
    print("| questions | n | arm | R@10 | evidence in budget | R@10 vs without | budget vs without |")
    print("|---|---|---|---|---|---|---|")
    groups = [("named", c) for c in SCORED] + [
        ("named", None),
        ("ran", None),
        ("all", 2),
        ("all", None),
        ("context", None),
    ]
    for group, category in groups:
        label = {
            "named": "name a time",
            "ran": "name a time, arm ran",
            "all": "all",
            "context": "name a time: the narrator's memory context (its R@10 column is unused)",
        }[group]
        label += f", category {category} ({CATEGORIES[category]})" if category else ", categories 1-4"
        base = None
        for arm in ARMS:
            per = scores[(group, arm)]
            pairs = per[category] if category else [p for c in SCORED for p in per[c]]
            if not pairs:
                continue
            r10, fill = mean([p[0] for p in pairs]), mean([p[1] for p in pairs])
            base = base or (r10, fill)
            delta = f"{r10 - base[0]:+.3f} | {fill - base[1]:+.3f}"
            print(f"| {label} | {len(pairs)} | {arm} | {r10:.3f} | {fill:.3f} | {delta} |")


if __name__ == "__main__":
    sys.exit(main())

"""Named time and facts on LoCoMo: does a question that names a time bring the facts of that time to the narrator?

LoCoMo (../shared/data/locomo, never copied into the repository) in the game's shape, as
bench/temporal_qa.py plays it: one conversation = one save, one utterance = one turn, the
session's date as the turn's story time (state key `date`), the save as of the end of the
conversation, its turns embedded with the real MiniLM the studio ships. The save is a
*living* one, and its facts are LoCoMo's own annotations, so no model is involved and the
figures are deterministic:

- each `session_N_observation` item (a speaker's fact with the utterance it comes from,
  "Caroline attended an LGBTQ support group recently…", D1:3) is a fact of that utterance's
  turn, naming the speaker (and the other speaker where the text names them);
- each `events_session_N` item (a speaker's life event, dated by the session) is a fact of
  the session's first turn, naming the speaker. Events cite no utterance, so they are never
  gold here: they only compete for the facts' places, as a real save's other facts would.

A question's **gold facts** are the observations citing one of its evidence utterances. The
questions scored: categories 1-4 (5, adversarial, is about the other speaker), naming a time
the save's story time places (`recall.temporal.time_preference` returns a preference), with at
least one gold fact. The characters in focus are the speakers the question names (both when
it names neither), as the narrator's on-scene names.

Arms, on the same saves, the question as the action:
- **with**: the studio as it is: the named time lifts the facts of its turns
  (`context_items.fact_items` with the context's `TimePreference`);
- **without**: the same context with the facts ranked as for a question naming no time (the
  context's `fact_items` handed no preference); the narrative search keeps its temporal arm in
  both, so only the facts layer differs.
Measured per question: the share of its gold facts (a) among the facts layer's first 12
candidates (`MAX_FACTS`: what one subject's facts held before the named time) and (b) in the
narrator's memory context (`next_turn_context`, token budget `--budget`, default 1,500);
the share of questions with at least one gold fact in the context; and, as the cost side,
the share of the question's evidence utterances that reach the narrator through either a
narrative item, a turn shown in full or a gold fact.

Reported with n per LoCoMo category and over all; the five conversations are all held out
(nothing here was fitted to them: the rule "prefer the facts of the named time's turns, drop
none" was set before the first run).

    .venv/bin/python bench/temporal_facts.py [--convs 26,30,41,42,43] [--budget 1500] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import DEFAULT_LOCOMO, locomo_save, setup_django  # noqa: E402
from temporal_qa import CATEGORIES, EVIDENCE, SCORED, load  # noqa: E402

TOP_FACTS = 12


def load_facts(path: Path, turns: list[dict]) -> tuple[list[dict], tuple[str, str]]:
    """Return LoCoMo's fact annotations as facts {turn_id, statement, entities, dia_id} and the two speakers."""
    data = json.loads(path.read_text(encoding="utf-8"))
    speakers = (data["speaker_a"], data["speaker_b"])
    turn_of = {t["dia_id"]: t["turn_id"] for t in turns}
    first_of_session = {}
    for t in turns:
        first_of_session.setdefault(int(t["dia_id"][1:].split(":")[0]), t["turn_id"])

    def entities(speaker: str, text: str) -> list[str]:
        return [speaker] + [s for s in speakers if s != speaker and re.search(rf"\b{re.escape(s)}\b", text)]

    facts = []
    for key in data:
        number = re.fullmatch(r"session_(\d+)_observation", key)
        if number:
            for speaker, items in data[key].items():
                for item in items:
                    text = item[0]
                    for a, b in EVIDENCE.findall(str(item[1:])):
                        dia_id = f"D{a}:{b}"
                        if dia_id in turn_of:
                            facts.append(
                                {
                                    "turn_id": turn_of[dia_id],
                                    "statement": text,
                                    "entities": entities(speaker, text),
                                    "dia_id": dia_id,
                                }
                            )
        number = re.fullmatch(r"events_session_(\d+)", key)
        if number and int(number.group(1)) in first_of_session:
            for speaker, items in data[key].items():
                if speaker == "date":
                    continue
                for text in items:
                    facts.append(
                        {
                            "turn_id": first_of_session[int(number.group(1))],
                            "statement": text,
                            "entities": entities(speaker, text),
                            "dia_id": None,
                        }
                    )
    return facts, speakers


def living_save(conv: str, conversation: dict, facts: list[dict], universe):
    """The conversation as a living save (`_common.locomo_save`) holding LoCoMo's facts; {fact id: dia_id}."""
    from studio.memory.facts import Fact, insert_facts
    from studio.world.models import MemoryMode, Save

    game_save = locomo_save(conv, conversation["turns"], universe)
    Save.objects.filter(pk=game_save.pk).update(memory_mode=MemoryMode.LIVING)
    game_save.refresh_from_db()
    gold_of = {}
    by_turn = defaultdict(list)
    for fact in facts:
        by_turn[fact["turn_id"]].append(fact)
    for turn_id in sorted(by_turn):
        rows = [Fact(statement=f["statement"], entities=f["entities"]) for f in by_turn[turn_id]]
        for fact_id, fact in zip(insert_facts(game_save.save_id, turn_id, rows), by_turn[turn_id]):
            gold_of[fact_id] = fact["dia_id"]
    return game_save, gold_of


def named_speakers(question: str, speakers: tuple[str, str]) -> list[str]:
    named = [s for s in speakers if re.search(rf"\b{re.escape(s)}\b", question, flags=re.IGNORECASE)]
    return named or list(speakers)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", default=str(DEFAULT_LOCOMO))
    parser.add_argument("--convs", default="26,30,41,42,43")
    parser.add_argument("--budget", type=int, default=1500)
    parser.add_argument("--json", help="write per-question rows to this file")
    args = parser.parse_args()
    setup_django()
    from studio.memory.recall import layers as context_module  # the facts layer's provider reads fact_items there
    from studio.memory.recall.context import next_turn_context
    from studio.memory.recall.context_items import fact_items
    from studio.memory.recall.query_params import ContextParams
    from studio.memory.recall.temporal import time_preference
    from studio.memory.models import subject_key_for
    from studio.world.models import Universe

    def facts_without_preference(game_save, subject_keys, subject_why, turn, prefer=None, **kwargs):
        return fact_items(game_save, subject_keys, subject_why, turn, None, **kwargs)

    arms = {"without": facts_without_preference, "with": fact_items}
    scores = defaultdict(lambda: defaultdict(list))  # arm -> category -> [(top12, context, any, evidence)]
    counts = defaultdict(lambda: defaultdict(int))
    rows, started = [], time.perf_counter()
    for conv in args.convs.split(","):
        path = Path(args.data) / f"{conv}.json"
        conversation = load(path)
        facts, speakers = load_facts(path, conversation["turns"])
        universe = Universe.objects.create(name=f"LoCoMo {conv}", slug=f"locomo-facts-{conv}")
        game_save, gold_of = living_save(conv, conversation, facts, universe)
        dia = {t["turn_id"]: t["dia_id"] for t in conversation["turns"]}
        print(
            f"conversation {conv}: {len(dia)} turns, {len(gold_of)} facts "
            f"({sum(1 for d in gold_of.values() if d)} observations), {len(conversation['questions'])} questions",
            file=sys.stderr,
        )
        for q in conversation["questions"]:
            category = q["category"]
            if category not in SCORED:
                continue
            counts["questions"][category] += 1
            prefer = time_preference(game_save=game_save, query_text=q["question"], horizon=game_save.current_turn)
            if prefer is None:
                continue
            counts["name a time"][category] += 1
            evidence = set(q["evidence"])
            gold = {fact_id for fact_id, dia_id in gold_of.items() if dia_id in evidence}
            if not gold:
                continue
            counts["scored"][category] += 1
            focus = named_speakers(q["question"], speakers)
            row = {
                "conv": conv,
                "category": category,
                "question": q["question"],
                "named_time": prefer.note,
                "gold": len(gold),
            }
            for arm, layer in arms.items():
                keys = [subject_key_for(name) for name in focus]
                candidates = layer(
                    game_save, keys, {key: "named in the question" for key in keys}, game_save.current_turn, prefer
                )
                top = {i.ref["fact_id"] for i in candidates[:TOP_FACTS]}
                context_module.fact_items = layer  # the context's facts layer for this arm
                try:
                    context = next_turn_context(
                        game_save=game_save,
                        params=ContextParams(
                            query_text=q["question"], focus_terms=tuple(focus), token_budget=args.budget
                        ),
                    )
                finally:
                    context_module.fact_items = fact_items
                taken = {i.ref["fact_id"] for i in context.included if i.layer == "fact"}
                seen_turns = {i.ref.get("turn_id") for i in context.included if i.layer == "narrative"} | set(
                    context.shown_turns
                )
                reached = ({dia[t] for t in seen_turns if t in dia} | {gold_of[f] for f in taken & gold}) & evidence
                score = (
                    len(top & gold) / len(gold),
                    len(taken & gold) / len(gold),
                    float(bool(taken & gold)),
                    len(reached) / len(evidence),
                )
                scores[arm][category].append(score)
                row[arm] = [round(v, 3) for v in score]
            rows.append(row)
    report(args, scores, counts, time.perf_counter() - started)
    if args.json:
        Path(args.json).write_text(json.dumps({"budget": args.budget, "convs": args.convs, "rows": rows}, indent=0))
    return 0


def mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else float("nan")


def report(args, scores, counts, elapsed) -> None:
    print(
        f"\nLoCoMo conversations {args.convs}, one utterance a turn dated by its session, LoCoMo's observations "
        f"and events as facts, as of the end; budget {args.budget} tokens; {elapsed:.0f} s."
    )
    print("\nQuestions (categories 1-4) / naming a time the save places / with a gold fact (scored):")
    for category in SCORED:
        print(
            f"  {category} {CATEGORIES[category]}: {counts['questions'][category]} / {counts['name a time'][category]}"
            f" / {counts['scored'][category]}"
        )
    print(
        "\n| questions | n | facts | gold in top 12 facts | gold in context | a gold fact in context "
        "| evidence reaching the narrator |"
    )
    print("|---|---|---|---|---|---|---|")
    for category in (*SCORED, None):
        label = f"category {category} ({CATEGORIES[category]})" if category else "categories 1-4"
        for arm in ("without", "with"):
            values = scores[arm][category] if category else [v for c in SCORED for v in scores[arm][c]]
            if not values:
                continue
            columns = " | ".join(f"{mean([v[i] for v in values]):.3f}" for i in range(4))
            print(f"| {label} | {len(values)} | {arm} | {columns} |")


if __name__ == "__main__":
    sys.exit(main())

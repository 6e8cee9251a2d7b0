"""The continuity guard, measured (issue 32): deterministic checks on a scripted scenario, and on a real model.

(a) Deterministic (no model; `--embedder minilm`, the studio's own, by default). The scenario of
bench/data/continuity/scenario.json: proposed narrations for the "Who knows what" playthrough
(bench/data/knowledge/scenario.json, played into a fresh save through the writes play uses), each
checked by `continuity_check` as the next turn after its `after_turn`, with seeded leaks, characters
off scene, contradictions and clean narrations, written before the checks were tuned. For each
check: recall (seeded cases found: the right kind, the right character, and for leaks and
contradictions one of the right items) and precision (findings of that kind that are a seeded one),
over every case. Then false findings: every turn of the demo's 48-turn save (classic; its universe
holds the nine secrets), and every turn of the knowledge scenario itself, checked as proposed after
the turn before it: all clean by construction, so every leak or presence finding there is false,
and every contradiction candidate one the model would have to reject. The baseline ("naive") is the
bench's own leak scorer from bench/knowledge.py: a secret's listed terms said anywhere in the text.

(b) On the model the AXIOM_LLM_* variables point at (bench/continuity_llm.py): `--real-model`, the leak
share with the guard off and on "regenerate once", same probes, same model; `--judge`, the judge's
verdicts on the seeded contradictions and on the demo's false candidates.

Run: `.venv/bin/python bench/continuity.py [--embedder minilm|hashing|none] [--real-model] [--probes N] [--judge]
[--skip-deterministic]`.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
ROOT = Path(__file__).resolve().parent.parent
SCENARIO = ROOT / "bench" / "data" / "continuity" / "scenario.json"
KNOWLEDGE = ROOT / "bench" / "data" / "knowledge" / "scenario.json"
OUT = ROOT / "bench" / "data" / "continuity"


def bench_save(data: dict, knowledge: dict):
    """A fresh save of the knowledge scenario under the bench's own id, with the scenario's extra facts."""
    from knowledge import scenario_save

    from studio.memory.knowledge.names import character_index
    from studio.memory.models import Fact
    from studio.saves.demo_knowledge import scenario_append_turn

    played = {**knowledge, "save_id": data["save_id"], "save_name": "Continuity bench"}
    save = scenario_save(played)
    index = character_index(save.universe, save=save)
    for turn in knowledge["turns"]:
        scenario_append_turn(save=save, turn=turn, index=index)
    for fact in data.get("extra_facts", []):
        Fact.objects.create(
            game_save=save,
            turn_id=fact["turn_id"],
            statement=fact["statement"],
            entities=fact["entities"],
            fact_type="event",
        )
    return save


def embedder_for(name: str):
    if name == "none":
        return None  # terms alone: the checks without an embedder
    if name == "hashing":
        sys.path.insert(0, str(ROOT))
        from tests.fakes import HashingEmbedder

        return HashingEmbedder()
    from studio.memory.embeddings.embedding import get_embedder

    return get_embedder()


def check_cases(save, data: dict, *, embedder) -> dict:
    """Check every case; score each check's recall and precision."""
    from studio.memory.continuity.guard import continuity_check
    from studio.memory.continuity.settings import guard_settings
    from studio.memory.models import Fact

    # "fact 7" in the scenario is "the fact of turn 7" (the save's ids are the database's)
    fact_turn = {f.pk: f.turn_id for f in Fact.objects.filter(game_save=save)}
    settings = guard_settings({"continuity_guard_judge": "false"})
    kinds = ("leak", "presence", "contradiction")
    score = {k: {"seeded": 0, "found": 0, "findings": 0, "right": 0, "missed": [], "wrong": []} for k in kinds}
    rows, seconds = [], []
    for case in data["cases"]:
        started = time.perf_counter()
        result = continuity_check(
            save,
            text=case["text"],
            player_input=case["input"],
            horizon=case["after_turn"],
            settings=settings,
            use_model=False,
            embedder=embedder,
        )
        seconds.append(time.perf_counter() - started)
        findings = result.findings
        for finding in findings:  # name facts by their turn, as the scenario does
            if finding.item.layer == "fact":
                finding.item.ref["turn_label"] = fact_turn.get(finding.item.ref.get("fact_id"))
        labelled = [(f, _scenario_label(f)) for f in findings]
        matched = set()
        for expected in case["expect"]:
            score[expected["kind"]]["seeded"] += 1
            hit = next(
                (i for i, (f, label) in enumerate(labelled) if i not in matched and _matches(f, label, expected)), None
            )
            if hit is None:
                score[expected["kind"]]["missed"].append(case["id"])
            else:
                matched.add(hit)
                score[expected["kind"]]["found"] += 1
        for i, (finding, label) in enumerate(labelled):
            score[finding.kind]["findings"] += 1
            if i in matched:
                score[finding.kind]["right"] += 1
            else:
                score[finding.kind]["wrong"].append(f"{case['id']}: {finding.character or 'narration'} / {label}")
        rows.append({"id": case["id"], "findings": [{**f.as_dict(), "scenario_label": label} for f, label in labelled]})
    return {"score": score, "rows": rows, "median_ms": round(1000 * sorted(seconds)[len(seconds) // 2], 1)}


def _scenario_label(finding) -> str:
    if finding.item.layer == "fact":
        return f"fact {finding.item.ref.get('turn_label')}"
    return finding.item.label()


def _matches(finding, label: str, expected: dict) -> bool:
    if finding.kind != expected["kind"]:
        return False
    if expected.get("character") and finding.character != expected["character"]:
        return False
    return "items" not in expected or label in expected["items"]


def false_findings(save, *, embedder, first: int = 1) -> dict:
    """Check every turn of `save` as proposed after the turn before it (all clean): count the findings by kind."""
    from studio.memory.continuity.guard import continuity_check
    from studio.memory.continuity.settings import guard_settings
    from studio.world.models import Event

    settings = guard_settings({"continuity_guard_judge": "false"})
    counts = {"leak": 0, "presence": 0, "contradiction": 0}
    examples = []
    events = list(Event.objects.filter(game_save=save, turn_id__gte=first).order_by("turn_id"))
    for event in events:
        result = continuity_check(
            save,
            text=event.narrative,
            player_input=event.player_input,
            horizon=event.turn_id - 1,
            settings=settings,
            use_model=False,
            embedder=embedder,
        )
        for finding in result.findings:
            counts[finding.kind] += 1
            examples.append(
                {
                    "turn": event.turn_id,
                    "kind": finding.kind,
                    "character": finding.character,
                    "item": finding.item.label(),
                    "why": finding.why,
                    "sentence": finding.sentence,
                }
            )
    return {"turns": len(events), "counts": counts, "examples": examples}


def naive_leaks(data: dict, knowledge: dict) -> dict:
    """The naive rule (bench/knowledge.py's scorer): a secret's listed terms anywhere in the text, whoever says it."""
    from knowledge import probe_terms, says_terms

    secrets = {s["entry_id"]: s for s in knowledge["secrets"]}
    flagged = seeded = found = 0
    for case in data["cases"]:
        leaks = [e for e in case["expect"] if e["kind"] == "leak"]
        hits = [sid for sid, s in secrets.items() if says_terms(case["text"], probe_terms(s["terms"], case["input"]))]
        flagged += bool(hits)
        seeded += len(leaks)
        found += sum(1 for e in leaks if any(f"lore {sid}" in e["items"] for sid in hits))
    return {
        "cases_flagged": flagged,
        "seeded": seeded,
        "found": found,
        "false_cases": sum(
            1
            for c in data["cases"]
            if not any(e["kind"] == "leak" for e in c["expect"])
            and any(says_terms(c["text"], probe_terms(s["terms"], c["input"])) for s in secrets.values())
        ),
    }


def deterministic(args) -> dict:
    from studio.world.models import Save
    from studio.universes.demo.loader import demo_load

    data = json.loads(SCENARIO.read_text())
    knowledge = json.loads(KNOWLEDGE.read_text())
    embedder = embedder_for(args.embedder)
    demo_load()
    save = bench_save(data, knowledge)
    cases = check_cases(save, data, embedder=embedder)
    demo = Save.objects.filter(universe__slug="the-drowned-reach").exclude(save_id=save.save_id).order_by("pk").first()
    return {
        "embedder": args.embedder,
        "cases": cases,
        "demo_48": false_findings(demo, embedder=embedder),
        "knowledge_32": false_findings(save, embedder=embedder),
        "naive": naive_leaks(data, knowledge),
    }


def report(result: dict) -> str:
    lines = [f"embedder: {result['embedder']}; median check {result['cases']['median_ms']} ms"]
    for kind, s in result["cases"]["score"].items():
        lines.append(
            f"{kind}: recall {s['found']}/{s['seeded']}, precision {s['right']}/{s['findings']}"
            + (f"; missed {', '.join(s['missed'])}" if s["missed"] else "")
            + (f"; wrong {'; '.join(s['wrong'])}" if s["wrong"] else "")
        )
    for name in ("demo_48", "knowledge_32"):
        r = result[name]
        lines.append(f"{name}: {r['turns']} clean turns, findings {r['counts']}")
        for example in r["examples"][:12]:
            lines.append(
                f"   turn {example['turn']} {example['kind']} {example['character']} {example['item']}: "
                f"{example['why'][:160]}"
            )
    n = result["naive"]
    lines.append(
        f"naive term scorer: seeded leaks found {n['found']}/{n['seeded']}, cases flagged {n['cases_flagged']}, "
        f"of them without a seeded leak {n['false_cases']}"
    )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--embedder", choices=["minilm", "hashing", "none"], default="minilm")
    parser.add_argument("--real-model", action="store_true", help="(b): the leak share on the model, guard off / on.")
    parser.add_argument("--probes", type=int, default=0, help="With --real-model: only the first N probes (0: all).")
    parser.add_argument(
        "--judge",
        action="store_true",
        help="(b): the judge on the model: seeded contradictions and the demo's false candidates.",
    )
    parser.add_argument("--skip-deterministic", action="store_true")
    args = parser.parse_args()
    from _common import setup_django

    setup_django()
    stamp = time.strftime("%Y%m%dT%H%M%S")
    if not args.skip_deterministic:
        started = time.time()
        result = deterministic(args)
        print(report(result))
        print(f"({time.time() - started:.0f} s, load {os.getloadavg()[0]:.2f})")
        (OUT / f"deterministic-{args.embedder}.json").write_text(json.dumps(result, indent=1, default=str) + "\n")
    if args.real_model:
        import continuity_llm

        print(continuity_llm.leak_share(out_path=OUT / f"real-model-{stamp}.jsonl", limit=args.probes))
    if args.judge:
        import continuity_llm

        from studio.world.models import Save
        from studio.universes.demo.loader import demo_load

        data, knowledge = json.loads(SCENARIO.read_text()), json.loads(KNOWLEDGE.read_text())
        demo_load()
        save = bench_save(data, knowledge)
        demo = (
            Save.objects.filter(universe__slug="the-drowned-reach").exclude(save_id=save.save_id).order_by("pk").first()
        )
        print(
            continuity_llm.judge_rates(
                save=save,
                demo=demo,
                data=data,
                embedder=embedder_for(args.embedder),
                out_path=OUT / f"judge-{stamp}.jsonl",
            )
        )


if __name__ == "__main__":
    main()

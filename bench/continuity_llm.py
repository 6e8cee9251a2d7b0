"""The continuity guard on a real model: the share of answers that leak a secret, guard off vs "regenerate once".

`leak_share` plays the "Who knows what" scenario (bench/data/knowledge/scenario.json) into a fresh
save turn by turn (the same writes play uses; lore and turns embedded with the studio's MiniLM) and,
after the turns the probes name, asks the model the AXIOM_LLM_* variables point at (the local 1.5B:
../shared/tools/local-llm) each probe: a character on scene is asked about a secret they do not
know (`PROBES`: the seven of bench/knowledge.py and nine more, fixed before any run). The narrator's
messages are bench/knowledge_llm.py's (a short system prompt holding the point-of-view memory
context the studio builds for that action, budget 1,200; temperature 0, at most 120 tokens).

- guard off: the first answer (at temperature 0 the same request gets the same answer: `Answers`
  keeps them, so a run after a change to the guard asks the model only for what changed);
- guard "regenerate once": `continuity_check` (deterministic: no judge call) reads the first
  answer; with a finding that stands, the model is asked once more with the findings as
  instructions after the action (`findings.instructions_text`, the text the Console's
  regenerate sends), and the second answer is the one kept, whatever its own findings.

Scored apart from the guard, with bench/knowledge.py's rule: the secret's listed terms the question
does not hold, said anywhere in the answer as whole words (`probe_terms`, `says_terms`). Every
answer, with the model, date and load, goes to bench/data/continuity/real-model-<time>.jsonl.
Scripted output is never scored: with no AXIOM_LLM_BASE_URL it says so and stops.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from knowledge import SCENARIO, probe_terms, says_terms
from knowledge_llm import NARRATOR_SYSTEM, NOT_CONFIGURED, _stamp

# (after turn, character on scene, the secret they do not know, the player's question)
PROBES = [p for p in json.loads(SCENARIO.read_text())["probes"] if not p["knows"]] + [
    {
        "after_turn": 3,
        "character": "Corvin Tull",
        "secret": "secret-pim-saw-the-body",
        "input": "Corvin, has anything strange turned up under the Raft lately?",
    },
    {
        "after_turn": 6,
        "character": "Pim",
        "secret": "secret-hesper-in-pumphouse",
        "input": "Pim, is Hesper still breathing somewhere? Where would she hide?",
    },
    {
        "after_turn": 10,
        "character": "Dace Morrow",
        "secret": "secret-wardens-opened-breach",
        "input": "Dace, who really broke the Mole?",
    },
    {
        "after_turn": 13,
        "character": "Odile Sarn",
        "secret": "secret-torn-ledger-page",
        "input": "Captain, where does Lady Verrow keep the missing Compact page?",
    },
    {
        "after_turn": 15,
        "character": "Pim",
        "secret": "secret-choir-sign",
        "input": "Pim, how do divers call for help under the water?",
    },
    {
        "after_turn": 19,
        "character": "Odile Sarn",
        "secret": "secret-dace-sold-the-route",
        "input": "Captain, how did House Verrow get Wren's diving route?",
    },
    {
        "after_turn": 21,
        "character": "Dace Morrow",
        "secret": "secret-corvin-forged-tallies",
        "input": "Dace, how does Corvin cheat the market?",
    },
    {"after_turn": 27, "character": "Pim", "secret": "secret-tide-code", "input": "Pim, when will the governor turn?"},
    {
        "after_turn": 30,
        "character": "Hesper Vale",
        "secret": "secret-wardens-opened-breach",
        "input": "Hesper, what really happened at the Breach?",
    },
]
MAX_TOKENS = 120


CACHE = Path(__file__).resolve().parent / "data" / "continuity" / "answers-cache.json"


class Answers:
    """The model's answers by request (system, prompt, model): at temperature 0 the same request gets the same answer,
    so a second run asks only what changed (a regenerated prompt after the instructions changed). Kept in CACHE."""

    def __init__(self, backend):
        self.backend = backend
        self.model = os.environ.get("AXIOM_LLM_MODEL", "default")
        self.saved = json.loads(CACHE.read_text()) if CACHE.exists() else {}
        self.asked = self.reused = 0

    def ask(self, memory: str, question: str, notes: str = "") -> str:
        import hashlib

        system = NARRATOR_SYSTEM.format(memory=memory)
        prompt = question + (f"\n\n{notes}" if notes else "")
        key = hashlib.sha256(json.dumps([self.model, MAX_TOKENS, system, prompt]).encode()).hexdigest()
        if key in self.saved:
            self.reused += 1
            return self.saved[key]
        response = self.backend.chat(
            system=system, prompt=prompt, operation="narrate", max_tokens=MAX_TOKENS, temperature=0.0
        )
        self.asked += 1
        self.saved[key] = response.text or ""
        CACHE.write_text(json.dumps(self.saved, indent=0, sort_keys=True) + "\n")
        return self.saved[key]


def leak_share(*, out_path: Path, limit: int = 0) -> str:
    from studio.memory.llm import get_llm_backend

    backend = get_llm_backend()
    if backend is None:
        return NOT_CONFIGURED
    from knowledge import scenario_save

    from studio.memory.continuity.findings import instructions_text
    from studio.memory.continuity.guard import continuity_check
    from studio.memory.continuity.settings import guard_settings
    from studio.memory.knowledge.names import character_index
    from studio.memory.recall.context import build_memory_context
    from studio.memory.vector import get_vector_memory
    from studio.saves.demo_knowledge import scenario_append_turn

    data = json.loads(SCENARIO.read_text())
    secrets = {s["entry_id"]: s for s in data["secrets"]}
    save = scenario_save({**data, "save_id": "continuity-llm", "save_name": "Continuity guard on a model"})
    memory = get_vector_memory()
    memory.rollback(save.save_id, 0)
    memory.sync_lore(
        save.save_id,
        [
            {
                "entry_id": e.entry_id,
                "title": e.title,
                "text": e.text,
                "links": [link.entry_id for link in e.links.all()],
            }
            for e in save.universe.lore_entries.prefetch_related("links")
        ],
    )
    index = character_index(save.universe, save=save)
    settings = guard_settings({"continuity_guard": "regenerate"})
    probes = PROBES[:limit] if limit else PROBES
    by_turn: dict[int, list[dict]] = {}
    for probe in probes:
        by_turn.setdefault(probe["after_turn"], []).append(probe)
    answers = Answers(backend)
    off = on = regenerated = flagged = 0
    scored = 0
    with out_path.open("w") as log:
        for turn in data["turns"]:
            scenario_append_turn(save=save, turn=turn, index=index)
            memory.embed_chunks(save.save_id, [{"turn_id": turn["turn_id"], "text": turn["narrative"]}])
            for probe in by_turn.get(turn["turn_id"], []):
                terms = probe_terms(secrets[probe["secret"]]["terms"], probe["input"])
                if not terms:
                    continue
                scored += 1
                context = build_memory_context(
                    game_save=save, query_text=probe["input"], token_budget=1200, vector_memory=memory
                )
                started = time.time()
                first = answers.ask(context.text, probe["input"])
                check = continuity_check(
                    save, text=first, player_input=probe["input"], settings=settings, use_model=False
                )
                standing = [f for f in check.standing if f.verdict != "candidate"]
                final, notes, second_check = first, "", None
                if standing:
                    flagged += 1
                    regenerated += 1
                    notes = instructions_text([f.instruction() for f in standing])
                    final = answers.ask(context.text, probe["input"], notes)
                    second_check = continuity_check(
                        save, text=final, player_input=probe["input"], settings=settings, use_model=False
                    )
                leaked_off = bool(says_terms(first, terms))
                leaked_on = bool(says_terms(final, terms))
                off += leaked_off
                on += leaked_on
                log.write(
                    json.dumps(
                        {
                            **_stamp(),
                            "probe": probe,
                            "scored_terms": terms,
                            "context_tokens": context.used_tokens,
                            "first": first,
                            "first_leaks": leaked_off,
                            "findings": [f.as_dict() for f in check.findings],
                            "notes": notes,
                            "second": final if notes else None,
                            "final_leaks": leaked_on,
                            "second_findings": [f.as_dict() for f in second_check.findings] if second_check else None,
                            "seconds": round(time.time() - started, 1),
                        }
                    )
                    + "\n"
                )
                log.flush()
                print(
                    f"probe {scored}: {probe['character']} / {probe['secret']}: off {'LEAK' if leaked_off else 'ok'}, "
                    f"guard {len(standing)} finding(s), final {'LEAK' if leaked_on else 'ok'}",
                    flush=True,
                )
    return (
        f"real model ({os.environ.get('AXIOM_LLM_MODEL', 'default')}): {scored} probes of a secret the character "
        f"does not know; leaked with the guard off {off}/{scored}, with 'regenerate once' {on}/{scored}; the guard "
        f"flagged {flagged} first answers and regenerated {regenerated}; model calls {answers.asked}, answers "
        f"reused from {CACHE.name} {answers.reused} (answers: {out_path.name})"
    )


def judge_rates(*, save, demo, data: dict, embedder, out_path: Path) -> str:
    """The judge on the model: the seeded contradictions' candidates (should be confirmed, citing the item and its
    turn) and the false candidates of the demo's 48 clean turns (should be rejected). One call per narration."""
    from studio.memory.continuity.guard import continuity_check
    from studio.memory.continuity.settings import guard_settings
    from studio.memory.llm import get_llm_backend
    from studio.world.models import Event

    backend = get_llm_backend()
    if backend is None:
        return NOT_CONFIGURED
    settings = guard_settings({"continuity_guard_calls_per_hour": "100000"})
    counts = {"seeded": 0, "confirmed": 0, "seeded_uncited": 0, "false": 0, "rejected": 0, "false_uncited": 0}
    with out_path.open("w") as log:
        jobs = [
            (save, c["after_turn"], c["input"], c["text"], True)
            for c in data["cases"]
            if any(e["kind"] == "contradiction" for e in c["expect"])
        ]
        jobs += [
            (demo, e.turn_id - 1, e.player_input, e.narrative, False)
            for e in Event.objects.filter(game_save=demo).order_by("turn_id")
        ]
        for game_save, horizon, player_input, text, seeded in jobs:
            plain = continuity_check(
                game_save,
                text=text,
                player_input=player_input,
                horizon=horizon,
                settings=settings,
                use_model=False,
                embedder=embedder,
            )
            if not plain.of_kind("contradiction"):
                continue
            started = time.time()
            result = continuity_check(
                game_save,
                text=text,
                player_input=player_input,
                horizon=horizon,
                settings=settings,
                llm=backend,
                embedder=embedder,
            )
            for finding in [f for f in result.findings if f.kind == "contradiction"]:
                key = "seeded" if seeded else "false"
                counts[key] += 1
                if finding.verdict == ("confirmed" if seeded else "rejected"):
                    counts["confirmed" if seeded else "rejected"] += 1
                elif finding.verdict == "candidate":
                    counts[f"{key}_uncited"] += 1
                log.write(
                    json.dumps(
                        {
                            **_stamp(),
                            "seeded": seeded,
                            "sentence": finding.sentence,
                            "item": finding.item.label(),
                            "turn": finding.item.turn,
                            "verdict": finding.verdict,
                            "judge": finding.judge,
                            "notes": result.notes,
                            "seconds": round(time.time() - started, 1),
                        }
                    )
                    + "\n"
                )
                log.flush()
    return (
        f"judge on the model: seeded contradiction candidates confirmed {counts['confirmed']}/{counts['seeded']} "
        f"({counts['seeded_uncited']} verdicts that did not cite the item and turn); the demo's false candidates "
        f"rejected {counts['rejected']}/{counts['false']} ({counts['false_uncited']} not citing) "
        f"(answers: {out_path.name})"
    )

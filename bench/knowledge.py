"""Who knows what, measured on the scenario of bench/data/knowledge/scenario.json.

Plays the 32-turn scenario (the demo universe, eight characters, nine secrets, five scenes)
turn by turn through the same writes play uses, and after every turn builds the memory
context for the next turn's input twice: with the point of view (on-scene characters: the
presence at that turn, the characters the input names) and as today (`pov=[]`). Against the
scenario's truth (who is present at each turn, who knows each secret from the start, the
reveals), written apart from the studio's rules, it reports (deterministic):

- presence: the share of turns whose recorded presence (state, aliases resolved, carry,
  scene changes) equals the truth;
Everything is read from the memory *text*, as the narrator's prompt prints it (the one
renderer, `MemoryContext.text`), the way the model reads it: an item shown unmarked is known
to every character on scene unless the "### X knows" lists at the end name it under some of
them (then to those only); an item marked `[narrator-only]` to none.

- leak share: of the (item, character) pairs the text presents as known, the share the
  character cannot know (must be 0; tests/saves/test_demo_knowledge.py asserts it);
- narrator-only: of the items no on-scene character can know, the share the text marks
  `[narrator-only]` (today's context marks none: every one of them reaches the narrator
  unmarked);
- probes: at set turns the player asks a character about a secret they do not know and one
  they do, with that character's point of view; recall is the share of known secrets the
  text presents to the character as known, and the guard the share of unknown secrets it
  does not (and marks narrator-only when it shows them).

On the model the AXIOM_LLM_* variables point at (the local 1.5B: ../shared/tools/local-llm;
bench/knowledge_llm.py, raw answers in bench/data/knowledge/<mode>-<time>.jsonl):
`--real-model` adds the leak probe (each probe narrated twice, with the POV context and with
today's, and scored for the secret's distinctive terms in the answer); `--extraction` the
presence and told-to accuracy of the living extraction on a fixed subset of the turns;
`--beliefs` the share of beliefs restating a fact or a mission, before and after. The last
two run without the deterministic part unless `--real-model` is given too.

The scoring rule (`probe_terms`, `says_terms`): the probe's question names the secret ("did
you know about the forged tallies and the false notches?"), so an answer that only echoes the
question must not count. A secret's terms (`terms` in the scenario, taken from its text) are
scored only when the question does not already hold them: a term is dropped when it occurs in
the question as a phrase or every one of its words does. A kept term counts when it occurs in
the answer as whole words (case-folded, curly apostrophes read as straight: "files" is not
"profiles"). A probe left with no term is reported as unscored, never as a leak or a miss.

Run: `.venv/bin/python bench/knowledge.py [--embedder hashing|minilm] [--real-model] [--extraction] [--beliefs]`.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
ROOT = Path(__file__).resolve().parent.parent
SCENARIO = ROOT / "bench" / "data" / "knowledge" / "scenario.json"


def fold(name: str) -> str:
    return " ".join(str(name or "").split()).casefold()


def _words(text: str) -> list[str]:
    return re.findall(r"[\w']+", str(text or "").casefold().replace("\u2019", "'"))


def _has_phrase(words: list[str], phrase: list[str]) -> bool:
    size = len(phrase)
    return bool(size) and any(words[i : i + size] == phrase for i in range(len(words) - size + 1))


def probe_terms(terms: list[str], question: str) -> list[str]:
    """Return the secret's `terms` the question does not already hold (the module's rule)."""
    asked = _words(question)
    kept = []
    for term in terms:
        words = _words(term)
        if words and not _has_phrase(asked, words) and not all(w in asked for w in words):
            kept.append(term)
    return kept


def says_terms(answer: str, terms: list[str]) -> list[str]:
    """Return the `terms` found in `answer` as whole words."""
    said = _words(answer)
    return [term for term in terms if _has_phrase(said, _words(term))]


class Truth:
    """The scenario's truth, read from the file alone (no studio rule is used here)."""

    def __init__(self, data: dict):
        self.present = {t["turn_id"]: {fold(n) for n in t["truth_present"]} for t in data["turns"]}
        self.secrets = {s["entry_id"]: s for s in data["secrets"]}
        self.reveals = [
            (t["turn_id"], fold(r["to"]), r["entry"]) for t in data["turns"] for r in t["reveals"] if "entry" in r
        ]
        self.fact_turn: dict[int, int] = {}  # database fact id -> turn (filled while playing)

    def knows_secret(self, name: str, entry_id: str, n: int) -> bool:
        start = {fold(k) for k in self.secrets[entry_id]["truth_knowers"]}
        return fold(name) in start or any(t <= n and who == fold(name) and e == entry_id for t, who, e in self.reveals)

    def knows(self, name: str, layer: str, ref: dict, n: int) -> bool | None:
        if layer == "fact":
            return fold(name) in self.present.get(self.fact_turn.get(int(ref.get("fact_id") or 0), -1), set())
        if layer in ("narrative", "chapter"):  # a chunk of a turn, or the turn shown in full
            return fold(name) in self.present.get(int(ref.get("turn_id") or 0), set())
        if layer == "lore":
            entry_id = ref.get("entry_id") or ""
            return self.knows_secret(name, entry_id, n) if entry_id in self.secrets else True
        return None  # beliefs and mental models: the scenario has none


def _lists(text: str) -> dict[str, set[str]]:
    """{character: the labels their "### X knows" list names}, read from a memory text ("Turns 3-5" is 3, 4, 5)."""
    lists: dict[str, set[str]] = {}
    for name, body in re.findall(r"^### (.+) knows\n((?:- .*\n?)+)", text, flags=re.M):
        labels = set()
        for line in body.splitlines():
            label = line[2:]
            span = re.fullmatch(r"Turns (\d+)-(\d+)", label)
            labels |= {f"Turn {t}" for t in range(int(span[1]), int(span[2]) + 1)} if span else {label}
        lists[name] = labels
    return lists


def presented(context) -> list[tuple[object, list[str], bool]]:
    """(item, the on-scene characters the text presents it as known to, whether it is marked) for every included
    item the memory text shows, read as the model reads it (the module docstring)."""
    from studio.memory.knowledge.pov import item_label

    text = context.text
    names = [c["name"] for c in context.pov.characters] if context.pov else []
    lists = _lists(text)
    out = []
    for item in context.included:
        if item.text not in text:
            continue
        marked = f"[narrator-only] {item.text}" in text
        label = item_label({"text": item.text, "layer": item.layer, "ref": item.ref, "title": item.why.get("title")})
        listed = [name for name in names if label in lists.get(name, set())]
        out.append((item, [] if marked else listed or names, marked))
    return out


def score_context(context, truth: Truth, n: int) -> dict:
    """Count what the memory text presents as known to whom, the leaks, and the narrator-only marks, for one context."""
    out = {"section_items": 0, "leaks": 0, "unknowable": 0, "unknowable_marked": 0, "leak_examples": []}
    pov = context.pov
    if pov is None or not pov.characters:
        return out
    names = [c["name"] for c in pov.characters]
    for item, knowers, marked in presented(context):
        for name in knowers:
            known = truth.knows(name, item.layer, item.ref, n)
            if known is None:
                continue
            out["section_items"] += 1
            if not known:
                out["leaks"] += 1
                out["leak_examples"].append((n, name, item.text[:80]))
        verdicts = [truth.knows(name, item.layer, item.ref, n) for name in names]
        if verdicts and all(v is False for v in verdicts):
            out["unknowable"] += 1
            out["unknowable_marked"] += marked
    return out


def scenario_save(data: dict):
    """Return a fresh save of the scenario (its secrets loaded into the demo universe, loaded first if needed)."""
    from studio.saves.demo_knowledge import scenario_save_create, scenario_secrets_load
    from studio.world.models import Save, Universe
    from studio.universes.demo.loader import demo_load

    if not Universe.objects.filter(slug="the-drowned-reach").exists():
        demo_load()
    universe = Universe.objects.get(slug="the-drowned-reach")
    scenario_secrets_load(universe=universe, data=data)
    Save.objects.filter(save_id=data["save_id"]).delete()
    return scenario_save_create(universe=universe, data=data)


def play_and_score(data: dict, *, embedder: str, vector_memory=None) -> dict:
    """Play the scenario into a fresh save of the demo universe and score every turn and probe."""
    from studio.memory.recall.context import build_memory_context
    from studio.memory.knowledge.models import Presence
    from studio.memory.knowledge.names import character_index
    from studio.saves.demo_knowledge import scenario_append_turn

    save = scenario_save(data)
    universe = save.universe
    memory = vector_memory
    if memory is None:
        from studio.memory.vector import get_vector_memory

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
            for e in universe.lore_entries.prefetch_related("links")
        ],
    )
    truth = Truth(data)
    index = character_index(universe, save=save)
    probes = {}
    for probe in data["probes"]:
        probes.setdefault(probe["after_turn"], []).append(probe)
    totals = {
        "pov": {"section_items": 0, "leaks": 0, "unknowable": 0, "unknowable_marked": 0, "leak_examples": []},
        "today_unknowable": 0,
        "today_items": 0,
        "contexts": 0,
        "pov_tokens": 0,
        "context_tokens": 0,
    }
    probe_rows = []
    turns = data["turns"]
    for position, turn in enumerate(turns):
        ids = scenario_append_turn(save=save, turn=turn, index=index)
        for fact_id in ids:
            truth.fact_turn[fact_id] = turn["turn_id"]
        memory.embed_chunks(save.save_id, [{"turn_id": turn["turn_id"], "text": turn["narrative"]}])
        n = turn["turn_id"]
        inputs = [p["input"] for p in probes.get(n, [])]
        if position + 1 < len(turns):
            inputs.append(turns[position + 1]["player_input"])
        for text in inputs:
            pov = build_memory_context(game_save=save, query_text=text, token_budget=1200, vector_memory=memory)
            today = build_memory_context(
                game_save=save, query_text=text, token_budget=1200, pov=[], vector_memory=memory
            )
            scored = score_context(pov, truth, n)
            for key in ("section_items", "leaks", "unknowable", "unknowable_marked"):
                totals["pov"][key] += scored[key]
            totals["pov"]["leak_examples"] += scored["leak_examples"]
            names = [c["name"] for c in pov.pov.characters] if pov.pov else []
            for item in today.included:
                verdicts = [truth.knows(name, item.layer, item.ref, n) for name in names]
                if verdicts and all(v is False for v in verdicts):
                    totals["today_unknowable"] += 1
            totals["today_items"] += len(today.included)
            totals["contexts"] += 1
            totals["pov_tokens"] += pov.pov.tokens if pov.pov else 0
            totals["context_tokens"] += pov.used_tokens
        for probe in probes.get(n, []):
            context = build_memory_context(
                game_save=save,
                query_text=probe["input"],
                token_budget=1200,
                pov=[probe["character"]],
                vector_memory=memory,
            )
            shown = [
                (item, knowers, marked)
                for item, knowers, marked in presented(context)
                if item.ref.get("entry_id") == probe["secret"]
            ]
            in_section = any(fold(probe["character"]) in {fold(k) for k in knowers} for _item, knowers, _m in shown)
            marked = any(m for _item, _knowers, m in shown)
            in_context = bool(shown)
            probe_rows.append(
                {
                    **probe,
                    "in_section": in_section,
                    "in_context": in_context,
                    "marked": marked,
                    "pov_context": context.text,
                    "today_context": build_memory_context(
                        game_save=save, query_text=probe["input"], token_budget=1200, pov=[], vector_memory=memory
                    ).text,
                }
            )
    rows = {r.turn_id: {fold(c) for c in r.characters} for r in Presence.objects.filter(game_save=save)}
    presence_right = sum(1 for t in turns if rows.get(t["turn_id"], set()) == truth.present[t["turn_id"]])
    return {
        "save": save,
        "totals": totals,
        "probes": probe_rows,
        "presence_right": presence_right,
        "turns": len(turns),
        "embedder": embedder,
    }


def report(result: dict) -> str:
    t, pov = result["totals"], result["totals"]["pov"]
    known = [p for p in result["probes"] if p["knows"]]
    unknown = [p for p in result["probes"] if not p["knows"]]
    lines = [
        f"scenario: {result['turns']} turns, {t['contexts']} contexts, embedder {result['embedder']}",
        f"presence right: {result['presence_right']}/{result['turns']}",
        (
            f"POV section items: {pov['section_items']}, leaks: {pov['leaks']} "
            f"(leak share {pov['leaks'] / max(pov['section_items'], 1):.3f})"
        ),
        (
            f"items no on-scene character can know: POV context {pov['unknowable']} "
            f"({pov['unknowable_marked']} marked narrator-only); today's context {t['today_unknowable']} of "
            f"{t['today_items']} items, none marked"
        ),
        (
            f"tokens: the point of view {t['pov_tokens'] / max(t['contexts'], 1):.0f} per context, within the "
            f"{t['context_tokens'] / max(t['contexts'], 1):.0f} context tokens (the budget pays it)"
        ),
        (
            f"probes: {len(known)} known secrets, recall in the character's section "
            f"{sum(p['in_section'] for p in known)}/{len(known)}; {len(unknown)} unknown secrets, kept out of the "
            f"section {sum(not p['in_section'] for p in unknown)}/{len(unknown)}, in the context and marked "
            f"{sum(p['marked'] for p in unknown)}/{sum(p['in_context'] for p in unknown)}"
        ),
    ]
    for example in pov["leak_examples"][:5]:
        lines.append(f"  leak: {example}")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--embedder", choices=["hashing", "minilm"], default="minilm")
    parser.add_argument("--real-model", action="store_true", help="The leak probe on the model (after the scenario).")
    parser.add_argument(
        "--probes",
        type=int,
        default=0,
        help="With --real-model: narrate only the first N unknown-secret and N known-secret probes (0: all).",
    )
    parser.add_argument(
        "--extraction",
        action="store_true",
        help="Presence and told-to extraction on the model, on a fixed subset of the scenario's turns.",
    )
    parser.add_argument(
        "--beliefs",
        action="store_true",
        help="Belief restatement before/after on the model (the living demo save's facts).",
    )
    parser.add_argument("--belief-turns", type=int, default=0, help="With --beliefs: only turns 1..N (0: all).")
    parser.add_argument("--out", type=Path, default=SCENARIO.parent, help="Where the answers go (jsonl).")
    args = parser.parse_args()
    from _common import setup_django

    workdir = setup_django()
    import knowledge_llm

    stamp = time.strftime("%Y%m%dT%H%M%S")
    out = args.out
    if args.real_model or not (args.extraction or args.beliefs):
        memory = None
        if args.embedder == "hashing":
            sys.path.insert(0, str(ROOT))
            from tests.fakes import make_vector_memory

            memory = make_vector_memory(os.path.join(workdir, "chroma-hashing"))
        data = json.loads(SCENARIO.read_text())
        started = time.time()
        result = play_and_score(data, embedder=args.embedder, vector_memory=memory)
        print(report(result))
        print(f"time: {time.time() - started:.1f} s; load: {os.getloadavg()}")
        if args.real_model:
            print(knowledge_llm.probe_leaks(result, out_path=out / f"real-model-{stamp}.jsonl", limit=args.probes))
    if args.extraction:
        print(knowledge_llm.extraction_accuracy(out_path=out / f"extraction-{stamp}.jsonl"))
    if args.beliefs:
        print(knowledge_llm.belief_restatement(out_path=out / f"beliefs-{stamp}.jsonl", turns=args.belief_turns))
    print(f"load at the end: {os.getloadavg()}")


if __name__ == "__main__":
    main()

"""Who knows what on a real model: the modes of bench/knowledge.py that call an LLM.

Each runs the studio's own code against the model the AXIOM_LLM_* variables point at (the
local 1.5B: ../shared/tools/local-llm) and writes every answer, with the model, the date and
the load, to bench/data/knowledge/<mode>-<time>.jsonl:

- `probe_leaks` (`--real-model`): each leak probe narrated with the point-of-view context and
  with today's (`pov=[]`), same model, same turns; scored with bench/knowledge.py's rule
  (`probe_terms`, `says_terms`: only the secret's terms the question does not hold).
- `extraction_accuracy` (`--extraction`): the living pipeline's extraction step
  (`extract_turn_facts` with a `Scene`: the same call, prompt and cleaning a living turn
  makes) on `EXTRACTION_TURNS`, a fixed subset of the scenario's turns chosen for its scene
  changes, arrivals and departures and tellings; who it says is present is compared with
  the scenario's `truth_present`, who it says told whom with the turn's `reveals`.
- `belief_restatement` (`--beliefs`): the share of beliefs that restate a single fact or a
  mission (MiniLM cosine >= `RESTATES` with a fact of the save, or with a mission or one of
  its sentences: `mission_texts`) and the facts per belief, before and after: before
  is the demo's living save as recorded on the 1.5B model (studio/universes/demo/living/,
  its provenance.json), after is the pipeline's consolidation step run again with today's
  code (`consolidate_turn`, then the refusal of mission restatements, `apply_consolidation`
  and `assign_holders`, as `write_turn` does) on the same facts, turn by turn.

Scripted output is never scored here: with no AXIOM_LLM_BASE_URL every mode says so and stops.
"""

from __future__ import annotations

import json
import os
import re
import statistics
import time
from pathlib import Path
from types import SimpleNamespace

from knowledge import SCENARIO, fold, probe_terms, says_terms, scenario_save

# Turns of the scenario the extraction is asked about, fixed before any run: the five scene
# changes (1, 8, 14, 21, 27), a departure (18) and the six turns where someone tells a secret
# (4, 6, 16, 20, 22, 32).
EXTRACTION_TURNS = (1, 4, 6, 8, 14, 16, 18, 20, 21, 22, 27, 32)
RESTATES = 0.9  # MiniLM cosine at and above which a belief restates a fact or a mission

NARRATOR_SYSTEM = (
    "You are the narrator of an interactive story. Answer the player's line with two or three sentences "
    "of narration and dialogue. Use the memory below.\n\n{memory}"
)


def _stamp() -> dict:
    return {
        "model": os.environ.get("AXIOM_LLM_MODEL", "default"),
        "base_url": os.environ.get("AXIOM_LLM_BASE_URL", ""),
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "load": os.getloadavg()[0],
    }


def _backend():
    from studio.memory.llm import get_llm_backend

    return get_llm_backend()


NOT_CONFIGURED = "real model: not configured (set AXIOM_LLM_BASE_URL; ../shared/tools/local-llm start)"


class Recorder:
    """A backend that keeps the text of every answer (the raw answers the jsonl records)."""

    def __init__(self, backend):
        self.backend = backend
        self.answers: list[str] = []

    def chat(self, **request):
        response = self.backend.chat(**request)
        self.answers.append(response.text or "")
        return response

    def model_for(self, operation: str) -> str:
        return getattr(self.backend, "model_for", lambda op: "")(operation)


class StepContext:
    """What the living pipeline's steps read of a job's context: its turn, a cache, progress."""

    def __init__(self, turn: int):
        self.job = SimpleNamespace(turn_id=turn, payload={}, pk=None)
        self.shared: dict = {}
        self._cache: dict = {}

    def cached(self, key: str, make):
        if key not in self._cache:
            self._cache[key] = make()
        return self._cache[key]

    def progress(self, *args, **kwargs) -> None:
        return None


def probe_leaks(result: dict, *, out_path: Path, limit: int = 0) -> str:
    """Narrate each probe with the POV context and with today's; score the secret's terms in the answers."""
    backend = _backend()
    if backend is None:
        return NOT_CONFIGURED
    secrets = {s["entry_id"]: s for s in json.loads(SCENARIO.read_text())["secrets"]}
    counts = {"pov": {"leak": 0, "told": 0}, "today": {"leak": 0, "told": 0}}
    n_unknown = n_known = unscored = 0
    chosen = result["probes"]
    if limit:
        chosen = [p for p in chosen if not p["knows"]][:limit] + [p for p in chosen if p["knows"]][:limit]
    with out_path.open("w") as log:
        for probe in chosen:
            terms = probe_terms(secrets[probe["secret"]]["terms"], probe["input"])
            if not terms:
                unscored += 1
                continue
            for variant in ("pov", "today"):
                started = time.time()
                response = backend.chat(
                    system=NARRATOR_SYSTEM.format(memory=probe[f"{variant}_context"]),
                    prompt=probe["input"],
                    operation="narrate",
                    max_tokens=120,
                    temperature=0.0,
                )
                text = response.text or ""
                said = says_terms(text, terms)
                counts[variant]["told" if probe["knows"] else "leak"] += bool(said)
                log.write(
                    json.dumps(
                        {
                            **_stamp(),
                            "mode": "probe",
                            "probe": probe["input"],
                            "after_turn": probe["after_turn"],
                            "character": probe["character"],
                            "secret": probe["secret"],
                            "knows": probe["knows"],
                            "variant": variant,
                            "scored_terms": terms,
                            "answer": text,
                            "terms_said": said,
                            "terms_hit": bool(said),
                            "seconds": round(time.time() - started, 1),
                        }
                    )
                    + "\n"
                )
                log.flush()
            n_known += probe["knows"]
            n_unknown += not probe["knows"]
    return (
        f"real model ({os.environ.get('AXIOM_LLM_MODEL', 'default')}): unknown-secret probes {n_unknown}: "
        f"leaked with POV {counts['pov']['leak']}/{n_unknown}, with today's context {counts['today']['leak']}/{n_unknown}; "
        f"known-secret probes {n_known}: said with POV {counts['pov']['told']}/{n_known}, with today's "
        f"{counts['today']['told']}/{n_known}; unscored (no term outside the question) {unscored} "
        f"(answers: {out_path.name})"
    )


def _tellings(turn: dict) -> set[tuple[str, str]]:
    return {(fold(r.get("from", "")), fold(r["to"])) for r in turn["reveals"]}


def extraction_accuracy(*, out_path: Path) -> str:
    """Ask the living extraction about `EXTRACTION_TURNS`; compare presence and tellings with the truth."""
    backend = _backend()
    if backend is None:
        return NOT_CONFIGURED
    from studio.memory.knowledge.extract import Scene
    from studio.memory.knowledge.names import character_index
    from studio.memory.llm import TrackedLLM
    from studio.memory.pipeline.living import extract_turn_facts

    data = json.loads(SCENARIO.read_text())
    save = scenario_save(data)
    universe = save.universe
    characters = character_index(universe, save=save).all_characters()
    recorder = Recorder(backend)
    llm = TrackedLLM(recorder, game_save_id=save.pk)
    turns = {t["turn_id"]: t for t in data["turns"]}
    rows = []
    with out_path.open("w") as log:
        for turn_id in EXTRACTION_TURNS:
            turn = turns[turn_id]
            scene = Scene(characters=characters)
            started = time.time()
            error = ""
            try:
                facts = extract_turn_facts(
                    StepContext(turn_id), save, llm, turn["narrative"], turn["state"], scene=scene
                )
            except Exception as exc:  # a failed call is a miss, recorded with its reason
                facts, error = [], f"{exc.__class__.__name__}: {exc}"
            truth = {fold(n) for n in turn["truth_present"]}
            said = {fold(n) for n in scene.present}
            told = {
                (fold(speaker), fold(listener)) for speaker, listeners in scene.told.values() for listener in listeners
            }
            row = {
                **_stamp(),
                "mode": "extraction",
                "turn_id": turn_id,
                "narrative": turn["narrative"],
                "truth_present": sorted(truth),
                "present": sorted(said),
                "truth_told": sorted(_tellings(turn)),
                "told": sorted(told),
                "facts": [f.statement for f in facts],
                "error": error,
                "answer": recorder.answers[-1] if recorder.answers and not error else "",
                "seconds": round(time.time() - started, 1),
            }
            rows.append(row)
            log.write(json.dumps(row) + "\n")
            log.flush()
    return extraction_report(rows, out_path.name)


def extraction_report(rows: list[dict], name: str) -> str:
    """Presence and told-to accuracy of extraction rows against their truth."""
    exact = sum(set(r["present"]) == set(r["truth_present"]) for r in rows)
    said = sum(len(r["present"]) for r in rows)
    right = sum(len(set(r["present"]) & set(r["truth_present"])) for r in rows)
    truth = sum(len(r["truth_present"]) for r in rows)
    pairs = lambda r, key: {tuple(p) for p in r[key]}  # noqa: E731
    listeners = lambda r, key: {p[1] for p in r[key]}  # noqa: E731
    telling = [r for r in rows if r["truth_told"]]
    quiet = [r for r in rows if not r["truth_told"]]
    pair_right = sum(len(pairs(r, "told") & pairs(r, "truth_told")) for r in rows)
    return (
        f"extraction ({len(rows)} turns, {sum(bool(r['error']) for r in rows)} failed calls): presence exact "
        f"{exact}/{len(rows)} turns; names right {right} of {said} said (precision), {right} of {truth} present "
        f"(recall). Told-to: {len(telling)} turns with a telling, listeners exact "
        f"{sum(listeners(r, 'told') == listeners(r, 'truth_told') for r in telling)}/{len(telling)}, "
        f"(speaker, listener) pairs right {pair_right} of {sum(len(r['told']) for r in rows)} said, of "
        f"{sum(len(r['truth_told']) for r in rows)} true; {len(quiet)} turns without one, "
        f"{sum(not r['told'] for r in quiet)}/{len(quiet)} said none (answers: {name})"
    )


def mission_texts(missions: list[str]) -> list[str]:
    """Each mission and each of its sentences: a belief that restates one sentence of a mission restates it."""
    texts: list[str] = []
    for mission in missions:
        for text in [mission, *re.split(r"(?<=[.!?;])\s+", mission or "")]:
            text = text.strip()
            if text and text not in texts:
                texts.append(text)
    return texts


def restatement_scores(beliefs: list[dict], facts: list[str], missions: list[str], embed, lexical=None) -> dict:
    """Share of `beliefs` ({statement, sources}) within `RESTATES` cosine of a fact or a mission; facts per belief.

    `lexical(statement)` is the pipeline's own test (`restates_mission`), counted apart: MiniLM
    puts "Wren Halloway remembers debts: who owes whom ..." at 0.83 of "The Reach remembers
    debts: who owes whom ...", under the 0.9 the issue set.
    """
    import numpy as np

    out = {
        "beliefs": len(beliefs),
        "restate_fact": 0,
        "restate_mission": 0,
        "restate": 0,
        "restate_mission_lexical": 0,
        "facts_per_belief_mean": 0.0,
        "facts_per_belief_median": 0.0,
        "rows": [],
    }
    if not beliefs:
        return out
    vectors = embed([b["statement"] for b in beliefs])
    fact_cos = vectors @ embed(facts).T if facts else np.zeros((len(beliefs), 1))
    mission_cos = vectors @ embed(missions).T if missions else np.zeros((len(beliefs), 1))
    for i, belief in enumerate(beliefs):
        best_fact, best_mission = float(fact_cos[i].max()), float(mission_cos[i].max())
        out["restate_fact"] += best_fact >= RESTATES
        out["restate_mission"] += best_mission >= RESTATES
        out["restate"] += max(best_fact, best_mission) >= RESTATES
        out["restate_mission_lexical"] += bool(lexical and lexical(belief["statement"]))
        out["rows"].append({**belief, "fact_cosine": round(best_fact, 3), "mission_cosine": round(best_mission, 3)})
    sizes = [len(b["sources"]) for b in beliefs]
    out["facts_per_belief_mean"] = round(statistics.fmean(sizes), 2)
    out["facts_per_belief_median"] = statistics.median(sizes)
    return out


def _beliefs(save, horizon: int) -> list[dict]:
    """The save's beliefs as they stood at turn `horizon` (as a rewind to it would leave them)."""
    from studio.memory.models import Observation
    from studio.memory.observations import BELIEF_ROLLBACK

    out = []
    for row in Observation.all_objects.filter(game_save=save, created_turn_id__lte=horizon).order_by("pk"):
        if row.updated_turn_id > horizon or row.last_source_turn > horizon:
            for name, value in BELIEF_ROLLBACK.values_at(row, horizon).items():
                setattr(row, name, value)
        if row.deleted_turn_id is None:
            out.append(
                {"statement": row.statement, "subject": row.subject, "holder": row.holder, "sources": row.sources or []}
            )
    return out


def belief_restatement(*, out_path: Path, turns: int = 0) -> str:
    """Consolidate the recorded living save's facts again with today's code; score both sets of beliefs."""
    backend = _backend()
    if backend is None:
        return NOT_CONFIGURED
    import studio.memory.jobs.dispatch as dispatch
    from studio.memory import missions as missions_module
    from studio.memory.embeddings.embedding import get_embedder
    from studio.memory.facts import Fact
    from studio.memory.knowledge.beliefs import assign_holders, drop_mission_restatements, restates_mission
    from studio.memory.llm import TrackedLLM
    from studio.memory.models import Fact as FactRow
    from studio.memory.models import MentalModel, Observation
    from studio.memory.observations import apply_consolidation
    from studio.memory.pipeline.living import consolidate_turn
    from studio.saves.demo_living import LIVING_SAVE_FILE, PROVENANCE_FILE, demo_living_load
    from studio.saves.portable.services import save_import
    from studio.universes.demo.loader import demo_load
    from studio.world.models import Universe

    dispatch.send = lambda job_id, countdown=0: None  # no embedding jobs: only the beliefs are measured
    if not Universe.objects.filter(slug="the-drowned-reach").exists():
        demo_load()
    universe = Universe.objects.get(slug="the-drowned-reach")
    before = demo_living_load(universe=universe).game_save
    after = save_import(
        universe=universe, data=LIVING_SAVE_FILE.read_bytes(), name="restatement, today's code"
    ).game_save
    Observation.all_objects.filter(game_save=after).delete()
    MentalModel.objects.filter(game_save=after).delete()
    mission = missions_module.get_universe_mission(after)
    missions = missions_module.get_belief_missions(after)
    recorder = Recorder(backend)
    llm = TrackedLLM(recorder, game_save_id=after.pk)
    last = min(after.current_turn, turns) if turns else after.current_turn
    refused = 0
    with out_path.open("w") as log:
        for turn in range(1, last + 1):
            facts = [Fact.from_row(r) for r in FactRow.objects.filter(game_save=after, turn_id=turn).order_by("pk")]
            if not facts:
                continue
            real_ids = [f.fact_id for f in facts]
            for fact in facts:  # the pipeline consolidates facts not written yet: provisional ids 1..n
                fact.fact_id = None
            started, error = time.time(), ""
            try:
                actions = consolidate_turn(StepContext(turn), after, llm, facts)
            except Exception as exc:  # a failed call is a turn with no belief change, recorded with its reason
                actions, error = [], f"{exc.__class__.__name__}: {exc}"
            real = {f.fact_id: real_ids[i] for i, f in enumerate(facts)}
            for action in actions:
                action.source_fact_ids = [real[i] for i in action.source_fact_ids if i in real]
            kept = drop_mission_restatements(actions, mission=mission, missions=missions)
            refused += len(actions) - len(kept)
            counts = apply_consolidation(after.save_id, turn, kept, {fid: turn for fid in real_ids}) if kept else {}
            if kept:
                assign_holders(after, turn, missions=missions)
            log.write(
                json.dumps(
                    {
                        **_stamp(),
                        "mode": "beliefs",
                        "turn_id": turn,
                        "facts": len(facts),
                        "error": error,
                        "answer": recorder.answers[-1] if recorder.answers and not error else "",
                        "actions": [
                            {
                                "kind": a.kind,
                                "statement": a.statement,
                                "subject": a.subject,
                                "sources": a.source_fact_ids,
                            }
                            for a in actions
                        ],
                        "refused": len(actions) - len(kept),
                        "counts": counts,
                        "seconds": round(time.time() - started, 1),
                    }
                )
                + "\n"
            )
            log.flush()
    embedder = get_embedder()
    texts = mission_texts([mission, *missions.values()])
    all_facts = list(FactRow.objects.filter(game_save=after, turn_id__lte=last).values_list("statement", flat=True))
    lexical = lambda statement: restates_mission(statement, [mission, *missions.values()])  # noqa: E731
    scores = {
        name: restatement_scores(_beliefs(save, last), all_facts, texts, embedder.encode, lexical)
        for name, save in (("before", before), ("after", after))
    }
    provenance = json.loads(PROVENANCE_FILE.read_text())
    with out_path.open("a") as log:
        log.write(
            json.dumps(
                {
                    **_stamp(),
                    "mode": "beliefs-scores",
                    "turns": last,
                    "refused": refused,
                    "before_recorded_with": provenance.get("model"),
                    "before_recorded_from": provenance.get("recorded_from"),
                    **scores,
                }
            )
            + "\n"
        )
    lines = [f"beliefs over turns 1-{last} of the living demo save ({len(all_facts)} facts; answers: {out_path.name})"]
    for name, s in scores.items():
        lines.append(
            f"  {name}: {s['beliefs']} beliefs, restating a fact or a mission {s['restate']}/{s['beliefs']} "
            f"(a fact {s['restate_fact']}, a mission {s['restate_mission']}); the mission by the pipeline's "
            f"lexical test {s['restate_mission_lexical']}; facts per belief mean "
            f"{s['facts_per_belief_mean']}, median {s['facts_per_belief_median']}"
        )
    lines.append(
        f"  after: mission restatements refused {refused}; held by a character "
        f"{sum(bool(b['holder']) for b in _beliefs(after, last))}"
    )
    return "\n".join(lines)

"""The judges of memory tests: one per kind, each returning a verdict and the records behind it.

A judge reads the save as it stands at turn `turn` (its current turn) through the studio's own
machinery, never a second copy of a rule:

- `knows`: `KnowledgeView` (studio/memory/knowledge/derive.py), what a character knows at a
  turn and why; "at or after turn N" is exact because knowledge only grows along a timeline:
  a character who knows an item at N knows it at every later turn (the view gives the turn they
  learned it), and one who does not know it at the save's turn knew it at no earlier one;
- `context`: `build_narrator_prompt` (studio/saves/narrator/prompt.py), the prompt the narrator
  reads for the action as the save's next turn, built by the one context pipeline and printed
  by the one renderer. The verdict is judged on that text: the entry is in the prompt when an
  included memory item of that entry is printed in it, or the entry's whole text is (the
  scenario, a template); the explain records say where, or why not (the item's cut, the lore
  engine's decision);
- `belief`: the save's live beliefs about the subject created by the turn, with the trend at
  the turn (`observations.compute_trend`, the Beliefs page's);
- `no_findings`: the continuity guard's findings through `findings.findings_in_turns`.

Each explain record is a flat dict whose `record` names what it is (`knowledge`, `fact`,
`prompt`, `context_item`, `lore`, `belief`, `finding`, `note`); the pages, the API and the
command print them as they are.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from studio.memory.knowledge.derive import KnowledgeView
from studio.memory.knowledge.names import CharacterIndex, character_index, fold
from studio.memory.models import Fact, Observation, subject_key_for
from studio.memory.observations import Observation as Belief
from studio.memory.recall.macros import MacroNames
from studio.memory.recall.query_params import InvalidParameters
from studio.saves.memory_tests.findings import findings_in_turns
from studio.saves.memory_tests.models import Verdict
from studio.saves.narrator.prompt import InvalidPlayerInput, build_narrator_prompt
from studio.universes.memory_tests.spec import BELIEF, CONTEXT, KNOWS, NO_FINDINGS, MemoryTestSpec

SNIPPET_CHARS = 160  # how much of the prompt a `prompt` record quotes around what it found
MAX_RECORDS = 40  # explain records kept per verdict (a subject with hundreds of beliefs lists the first)


@dataclass
class Judged:
    verdict: str
    summary: str
    explain: list[dict[str, Any]] = field(default_factory=list)


class SaveReader:
    """What the judges of one run share: the save, its turn, the character index and the book's entries."""

    def __init__(self, game_save, *, turn: int, vector_memory=None):
        self.save = game_save
        self.turn = turn
        self.vector_memory = vector_memory
        self._index: CharacterIndex | None = None
        self._view: KnowledgeView | None = None
        self._entries: dict[str, tuple[str, str]] | None = None
        self._prompts: dict[tuple, Any] = {}

    @property
    def index(self) -> CharacterIndex:
        if self._index is None:
            self._index = character_index(self.save.universe, save=self.save)
        return self._index

    @property
    def view(self) -> KnowledgeView:
        if self._view is None:
            self._view = KnowledgeView(self.save, horizon=self.turn, index=self.index)
        return self._view

    @property
    def entries(self) -> dict[str, tuple[str, str]]:
        """entry_id -> (title, text) of the universe's Lore Book."""
        if self._entries is None:
            self._entries = {
                entry_id: (title, text)
                for entry_id, title, text in self.save.universe.lore_entries.values_list("entry_id", "title", "text")
            }
        return self._entries

    def prompt(self, action: str, pov: tuple[str, ...]):
        """The narrator's prompt for `action` (built once per action and point of view in a run)."""
        key = (action, pov)
        if key not in self._prompts:
            self._prompts[key] = build_narrator_prompt(
                game_save=self.save, player_input=action, pov=list(pov) or None, vector_memory=self.vector_memory
            )
        return self._prompts[key]


def judge(spec: MemoryTestSpec, reader: SaveReader) -> Judged:
    """Return the verdict of `spec` on the save `reader` reads, with the explain records behind it."""
    if not spec.applies_at(reader.turn):
        span = (
            f"turns {spec.turn} to {spec.until}"
            if spec.until is not None and spec.kind != NO_FINDINGS
            else f"turn {spec.turn} on"
        )
        return Judged(
            Verdict.SKIPPED,
            f"Not judged: the save stands at turn {reader.turn}; the test applies from {span}.",
            [{"record": "note", "note": f"the test applies from {span}"}],
        )
    return JUDGES[spec.kind](spec, reader)


def _verdict(ok: bool) -> str:
    return Verdict.PASS if ok else Verdict.FAIL


# -- knows ------------------------------------------------------------------------------------


def judge_knows(spec: MemoryTestSpec, reader: SaveReader) -> Judged:
    p = spec.params
    name = reader.index.resolve(p["character"])
    as_named = "" if fold(name) == fold(p["character"]) else f" (“{p['character']}” is {name})"
    if fold(name) not in {fold(c) for c in reader.view.characters()}:
        return Judged(
            Verdict.ERROR,
            f"“{p['character']}” is no character of the Lore Book or the save (a typo?): "
            "nothing can be said of what they know.",
            [{"record": "note", "note": "known characters: " + ", ".join(reader.view.characters())}],
        )
    expect = bool(p["knows"])
    if p.get("entry"):
        entry_id = p["entry"]
        if entry_id not in reader.entries:
            return Judged(
                Verdict.ERROR,
                f"The Lore Book has no entry “{entry_id}”.",
                [{"record": "note", "note": f"no entry_id “{entry_id}” in the Lore Book"}],
            )
        knowing = reader.view.entry(name, entry_id)
        record = {
            "record": "knowledge",
            "character": name,
            "item": f"entry {entry_id}",
            "title": reader.entries[entry_id][0],
            "known": knowing.known,
            "why": knowing.why,
            "learned_turn": knowing.learned_turn,
            "at_turn": reader.turn,
        }
        what = f"the entry “{entry_id}”"
        if not expect:
            return Judged(
                _verdict(not knowing.known),
                f"{name}{as_named} {'knows' if knowing.known else 'does not know'} {what} at turn "
                f"{reader.turn}: {knowing.why}.",
                [record],
            )
        late = knowing.known and knowing.learned_turn is not None and knowing.learned_turn > spec.turn
        if late:
            return Judged(
                Verdict.FAIL,
                f"{name}{as_named} learned {what} only at turn {knowing.learned_turn}, after turn "
                f"{spec.turn}: {knowing.why}.",
                [record],
            )
        return Judged(
            _verdict(knowing.known),
            f"{name}{as_named} {'knows' if knowing.known else 'does not know'} "
            f"{what} at turn {reader.turn}: {knowing.why}.",
            [record],
        )
    return _judge_fact(spec, reader, name, as_named, expect)


def _judge_fact(spec: MemoryTestSpec, reader: SaveReader, name: str, as_named: str, expect: bool) -> Judged:
    phrase = spec.params["fact"]
    wanted = phrase.casefold()
    facts = [
        (pk, turn, statement)
        for pk, turn, statement in Fact.objects.filter(game_save_id=reader.save.pk, turn_id__lte=reader.turn)
        .order_by("turn_id", "id")
        .values_list("id", "turn_id", "statement")
        if wanted in statement.casefold()
    ]
    if not facts:
        note = {"record": "note", "note": f"no fact up to turn {reader.turn} holds “{phrase}”"}
        return Judged(
            _verdict(not expect),
            f"No fact up to turn {reader.turn} holds “{phrase}”, so {name}{as_named} cannot know one.",
            [note],
        )
    records, known_by_n, known_now = [], [], []
    for pk, turn, statement in facts:
        knowing = reader.view.fact(name, pk, turn)
        records.append(
            {
                "record": "fact",
                "fact_id": pk,
                "turn_id": turn,
                "statement": statement,
                "character": name,
                "known": knowing.known,
                "why": knowing.why,
                "learned_turn": knowing.learned_turn,
            }
        )
        if knowing.known:
            known_now.append(turn)
            if knowing.learned_turn is None or knowing.learned_turn <= spec.turn:
                known_by_n.append(turn)
    count = f"{len(facts)} fact{'s' if len(facts) != 1 else ''} holding “{phrase}”"
    if expect:
        if known_by_n:
            return Judged(
                Verdict.PASS,
                f"{name}{as_named} knows {len(known_by_n)} of the {count} since turn {spec.turn} or earlier.",
                records[:MAX_RECORDS],
            )
        if known_now:
            return Judged(
                Verdict.FAIL, f"{name}{as_named} knows the {count} only after turn {spec.turn}.", records[:MAX_RECORDS]
            )
        return Judged(Verdict.FAIL, f"{name}{as_named} knows none of the {count}.", records[:MAX_RECORDS])
    if known_now:
        return Judged(
            Verdict.FAIL,
            f"{name}{as_named} knows {len(known_now)} of the {count} at turn {reader.turn}.",
            records[:MAX_RECORDS],
        )
    return Judged(
        Verdict.PASS, f"{name}{as_named} knows none of the {count} at turn {reader.turn}.", records[:MAX_RECORDS]
    )


# -- context ----------------------------------------------------------------------------------


def _snippet(text: str, at: int, length: int) -> str:
    start = max(0, at - 20)
    return (
        ("…" if start else "")
        + text[start : start + SNIPPET_CHARS].replace("\n", " ⏎ ")
        + ("…" if start + SNIPPET_CHARS < len(text) else "")
    )


def judge_context(spec: MemoryTestSpec, reader: SaveReader) -> Judged:
    p = spec.params
    entry_id, expect = p["entry"], bool(p["includes"])
    if entry_id not in reader.entries:
        return Judged(
            Verdict.ERROR,
            f"The Lore Book has no entry “{entry_id}”.",
            [{"record": "note", "note": f"no entry_id “{entry_id}” in the Lore Book"}],
        )
    try:
        prompt = reader.prompt(p["action"], tuple(p.get("pov") or ()))
    except (InvalidPlayerInput, InvalidParameters) as exc:
        return Judged(Verdict.ERROR, f"The prompt cannot be built: {exc}", [{"record": "note", "note": str(exc)}])
    text = prompt.system + "\n\n" + prompt.user
    memory = prompt.memory
    macros = MacroNames(**memory.macros)
    records: list[dict[str, Any]] = []
    found_at = None
    for item in memory.items:
        if item.ref.get("entry_id") != entry_id:
            continue
        at = -1
        if item.included:
            at = text.find(macros.fill(item.text))
            at = text.find(item.text) if at < 0 else at
        if at >= 0 and found_at is None:
            found_at = at
        records.append(
            {
                "record": "context_item",
                "layer": item.layer,
                "included": item.included,
                "printed": at >= 0,
                "reason": item.reason,
                "decision": item.why.get("budget") or item.cut or "",
                "tokens": item.tokens,
            }
        )
    title, body = reader.entries[entry_id]
    whole = body.strip()
    if found_at is None and whole:
        at = text.find(macros.fill(whole))
        if at >= 0:
            found_at = at
            records.append(
                {
                    "record": "prompt",
                    "note": "the entry's whole text is in the prompt outside its own memory "
                    "items (the instructions, the scenario or another item hold it)",
                }
            )
    lore = next((r for r in memory.lore_explain if r.get("entry_id") == entry_id), None)
    if lore is not None:
        records.append(
            {
                "record": "lore",
                "activated": lore.get("activated"),
                "code": lore.get("code"),
                "reasons": "; ".join(lore.get("reasons") or []),
                "context": "; ".join(lore.get("context") or []),
            }
        )
    present = found_at is not None
    where = {
        "record": "prompt",
        "found": present,
        "prompt_chars": len(text),
        "prompt_tokens": prompt.tokens_estimate,
        "turn": prompt.turn_id,
    }
    if present:
        where.update(at=found_at, snippet=_snippet(text, found_at, SNIPPET_CHARS))
    records.insert(0, where)
    said = f"The narrator's prompt for “{p['action'][:80]}” at turn {prompt.turn_id} "
    if present:
        summary = said + f"holds the entry “{title}” (character {found_at} of {len(text)})."
    else:
        cut = next((r["decision"] for r in records if r.get("record") == "context_item" and not r["included"]), "")
        why = (
            f": {cut}"
            if cut
            else (f": {lore['reasons'][0]}" if lore and lore.get("reasons") else ": no memory layer offered it")
        )
        summary = said + f"does not hold the entry “{title}”{why}."
    return Judged(_verdict(present == expect), summary, records[:MAX_RECORDS])


# -- belief -----------------------------------------------------------------------------------


def judge_belief(spec: MemoryTestSpec, reader: SaveReader) -> Judged:
    p = spec.params
    subject = reader.index.resolve(p["subject"])
    keys = {subject_key_for(p["subject"]), subject_key_for(subject)}
    rows = Observation.objects.filter(
        game_save_id=reader.save.pk, created_turn_id__lte=reader.turn, subject_key__in=keys
    ).order_by("-updated_turn_id", "-id")
    phrase = (p.get("statement") or "").casefold()
    holder = fold(reader.index.resolve(p["holder"])) if p.get("holder") else None
    records, matching = [], []
    for row in rows:
        trend = Belief.from_row(row).trend(reader.turn)
        misses = []
        if phrase and phrase not in row.statement.casefold():
            misses.append(f"its statement does not hold “{p['statement']}”")
        if holder is not None and fold(row.holder or "") != holder:
            misses.append(f"held by {row.holder or 'the world'}")
        if p["trend"] != "any" and trend != p["trend"]:
            misses.append(f"its trend is {trend}")
        if not misses:
            matching.append(row)
        records.append(
            {
                "record": "belief",
                "belief_id": row.pk,
                "statement": row.statement,
                "holder": row.holder,
                "trend": trend,
                "source_turns": sorted({int(s.get("turn_id") or 0) for s in row.sources or []}),
                "updated_turn": row.updated_turn_id,
                "matches": not misses,
                "why": "; ".join(misses) or "matches",
            }
        )
    wanted = [f"holding “{p['statement']}”"] if p.get("statement") else []
    wanted += [f"held by {p['holder']}"] if p.get("holder") else []
    wanted += [f"with the trend {p['trend']}"] if p["trend"] != "any" else []
    described = " ".join(wanted) or "of any kind"
    if not records:
        records.append({"record": "note", "note": f"no belief about {subject} at turn {reader.turn}"})
    summary = (
        f"{len(matching)} of {len(rows)} belief{'s' if len(rows) != 1 else ''} about {subject} at turn "
        f"{reader.turn} match{'es' if len(matching) == 1 else ''} (a belief {described})."
    )
    return Judged(_verdict(bool(matching) == bool(p["exists"])), summary, records[:MAX_RECORDS])


# -- no_findings ------------------------------------------------------------------------------


def judge_no_findings(spec: MemoryTestSpec, reader: SaveReader) -> Judged:
    kind = spec.params["finding"]
    last = reader.turn if spec.until is None else min(spec.until, reader.turn)
    found, note = findings_in_turns(
        reader.save, first_turn=spec.turn, last_turn=last, kind=None if kind == "any" else kind
    )
    records = [
        {"record": "finding", **{k: v for k, v in item.items() if isinstance(v, (str, int, float, bool))}}
        for item in found[:MAX_RECORDS]
    ]
    if note:
        records.append({"record": "note", "note": note})
    what = "continuity finding" + ("" if kind == "any" else f" of kind {kind}")
    if found:
        turns = sorted({int(f.get("turn_id") or 0) for f in found})
        return Judged(
            Verdict.FAIL,
            f"{len(found)} {what}{'s' if len(found) != 1 else ''} in turns {spec.turn} to {last} "
            f"(turn{'s' if len(turns) != 1 else ''} {', '.join(map(str, turns))}).",
            records,
        )
    return Judged(Verdict.PASS, f"No {what} in turns {spec.turn} to {last}" + (f" ({note})." if note else "."), records)


JUDGES = {KNOWS: judge_knows, CONTEXT: judge_context, BELIEF: judge_belief, NO_FINDINGS: judge_no_findings}

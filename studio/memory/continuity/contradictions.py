"""Contradictions: candidates found by search, judged by the model, each citing the item and its turn.

Candidates (deterministic, `contradiction_candidates`), against canon (the Lore Book, turn 0)
and what is established up to turn N (facts, the beliefs held at N, who is where at N):

- **a dead character acts**: a character a lore entry, fact or belief says is dead (a death word
  with the character as its subject, not hedged: "believed drowned" is not dead) says or does
  something in the narration;
- **two places**: a character present at N, in the scene the state names, is placed by the
  narration in another place of the Lore Book ("in the Bellspire") without moving there;
- **a fact flips**: a sentence and an item found by search (shared index terms weighted by
  rarity among the items, at least one of them no name) where one says the opposite of the
  other: a negation on one side only, an antonym ("alive" / "dead", "trusts" / "distrusts"),
  another number for the same thing ("eleven tallies" / "twelve tallies").

A candidate is only possible until the model judges it (`judge`): one call per narration with
the strongest candidates (`GuardSettings.max_candidates`), a JSON schema whose every verdict must
cite the candidate's item and turn exactly as given. A verdict that cites another item or turn
is not a verdict: the candidate stays possible ("candidate"), as it does without a model.
"""

from __future__ import annotations

import math
import re
from collections import Counter

from studio.memory.continuity.checks import GuardContext, terms_of
from studio.memory.continuity.findings import Finding, Item
from studio.memory.continuity.text import MOVES, Sentence, names_in, split_sentences
from studio.memory.knowledge.names import fold
from studio.memory.retrieval.lexical import index_terms

__all__ = ["JUDGE_SCHEMA", "JUDGE_SYSTEM", "contradiction_candidates", "judge"]

DEATH = re.compile(r"\b(dead|died|dies|killed|drowned|slain|murdered|perished|hanged|buried|corpse)\b", re.IGNORECASE)
HEDGE = re.compile(
    r"\b(believed|thought|presumed|feared|said to be|rumou?red|nearly|almost|not|never|if|whether|"
    r"may|might|could|would|claims?)\b",
    re.IGNORECASE,
)
LOCATIVE = r"(?:in|at|on|inside|aboard|within|atop|beneath|under)\s+"
NEGATIONS = frozenset(
    {
        "not",
        "no",
        "never",
        "nobody",
        "nothing",
        "none",
        "neither",
        "nor",
        "cannot",
        "without",
        "n't",
        "isn't",
        "wasn't",
        "aren't",
        "doesn't",
        "didn't",
        "don't",
        "won't",
        "can't",
        "hasn't",
        "hadn't",
        "haven't",
        "nowhere",
        "noone",
    }
)
ANTONYMS = (
    ("alive", "dead"),
    ("alive", "drowned"),
    ("living", "dead"),
    ("open", "closed"),
    ("open", "shut"),
    ("open", "sealed"),
    ("locked", "unlocked"),
    ("full", "empty"),
    ("friend", "enemy"),
    ("trust", "distrust"),
    ("loyal", "traitor"),
    ("young", "old"),
    ("true", "false"),
    ("guilty", "innocent"),
    ("rich", "poor"),
    ("love", "hate"),
    ("hidden", "found"),
    ("lost", "found"),
    ("whole", "broken"),
    ("safe", "dead"),
    ("married", "widowed"),
    ("sober", "drunk"),
    ("healthy", "sick"),
    ("awake", "asleep"),
)
NUMBERS = {
    w: n
    for n, w in enumerate(
        "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen seventeen "
        "eighteen nineteen twenty".split()
    )
}
NUMBERS.update(
    {
        "thirty": 30,
        "forty": 40,
        "fifty": 50,
        "sixty": 60,
        "seventy": 70,
        "eighty": 80,
        "ninety": 90,
        "hundred": 100,
        "thousand": 1000,
    }
)
SEARCH_TOP = 5  # items the search offers per sentence
MIN_WEIGHT = 2.0  # the shared terms' rarity weight an item needs to be offered
# A flip needs the sentence and the item to be about the same thing: cosine of their vectors at least this
# (bench/continuity.py: the seeded flips 0.61-0.88; the demo's clean sentences beside lore they share terms with
# mostly below 0.6); without an embedder, this many shared terms that are no name.
FLIP_SIMILAR = 0.6
FLIP_TERMS_WITHOUT_EMBEDDER = 3


def _words(text: str) -> list[str]:
    return re.findall(r"[a-z]+(?:'t)?|\d+", (text or "").lower().replace("’", "'").replace("n't", " n't"))


def _negated(text: str) -> bool:
    return any(w in NEGATIONS for w in _words(text))


def _numbers(text: str) -> dict[str, int]:
    """The numbers `text` gives, each with the word after it ("eleven tallies" -> {"tally": 11})."""
    words = _words(text)
    out = {}
    for i, word in enumerate(words):
        value = int(word) if word.isdigit() else NUMBERS.get(word)
        if value is None or i + 1 >= len(words):
            continue
        after = [t for t in index_terms(" ".join(words[i + 1 : i + 3])) if len(t) >= 3]  # in order: the next noun
        if after:
            out[after[0]] = value
    return out


def _antonym(a: set[str], b: set[str]) -> tuple[str, str] | None:
    for x, y in ANTONYMS:
        fx, fy = next(iter(terms_of(x)), x), next(iter(terms_of(y)), y)
        if (fx in a and fy in b and fy not in a) or (fy in a and fx in b and fx not in a):
            return (x, y)
    for term in a ^ b:  # "distrust" against "trust", "unlocked" against "locked"
        for prefix in ("dis", "un", "in", "im"):
            if term.startswith(prefix) and term[len(prefix) :] in (a | b) - {term} and len(term) > len(prefix) + 3:
                if (term in a) != (term[len(prefix) :] in a):
                    return (term[len(prefix) :], term)
    return None


class _Corpus:
    """The items a narration is searched against: lore sentences (canon), facts, beliefs; with term rarity."""

    def __init__(self, ctx: GuardContext):
        from studio.memory.models import Observation

        self.items: list[tuple[Item, set[str]]] = []
        for entry_id, entry in ctx.entries.items():
            for sentence in split_sentences(entry["text"]):
                self.items.append(
                    (Item("lore", {"entry_id": entry_id, "title": entry["title"]}, sentence, 0), terms_of(sentence))
                )
        for fact in ctx.facts:
            self.items.append(
                (Item("fact", {"fact_id": fact["id"]}, fact["statement"], fact["turn_id"]), terms_of(fact["statement"]))
            )
        for belief in Observation.objects.filter(game_save_id=ctx.save.pk, created_turn_id__lte=ctx.horizon).values(
            "id", "statement", "subject", "updated_turn_id", "created_turn_id"
        ):
            turn = belief["updated_turn_id"] if belief["updated_turn_id"] <= ctx.horizon else belief["created_turn_id"]
            self.items.append(
                (
                    Item(
                        "belief", {"belief_id": belief["id"], "subject": belief["subject"]}, belief["statement"], turn
                    ),
                    terms_of(belief["statement"]),
                )
            )
        df = Counter(t for _item, terms in self.items for t in terms)
        n = max(1, len(self.items))
        self.weight = {t: math.log(1 + n / c) for t, c in df.items()}

    def search(self, terms: set[str], name_terms: set[str]) -> list[tuple[float, Item, set[str]]]:
        found = []
        for item, item_terms in self.items:
            shared = terms & item_terms
            if len(shared) < 2 or not shared - name_terms:
                continue
            weight = sum(self.weight.get(t, 0.0) for t in shared)
            if weight >= MIN_WEIGHT:
                found.append((weight, item, item_terms))
        found.sort(key=lambda f: -f[0])
        return found[:SEARCH_TOP]


def _clause(text: str, terms: set[str]) -> str:
    """The clause of `text` (between commas, semicolons, colons, dashes) holding most of `terms`."""
    clauses = [c for c in re.split(r"[,;:—–]|\s-\s", text) if c.strip()] or [text]
    return max(clauses, key=lambda c: len(terms_of(c) & terms))


def _flip(sentence: str, terms: set[str], item: Item, item_terms: set[str]) -> str:
    """Why `sentence` may say the opposite of `item` ("" when nothing opposes): a negation in the clause that
    shares the most with the other on one side only, an antonym, another number for the same thing."""
    shared = terms & item_terms
    if _negated(_clause(sentence, shared)) != _negated(_clause(item.text, shared)):
        return "one says “not” where the other does not"
    pair = _antonym(terms, item_terms)
    if pair:
        return f"“{pair[0]}” against “{pair[1]}”"
    ours, theirs = _numbers(sentence), _numbers(item.text)
    for thing, value in ours.items():
        if thing in theirs and theirs[thing] != value:
            return f"{value} against {theirs[thing]} ({thing})"
    return ""


# The subject's death as a predicate: "Crane drowned", "Tobin was killed", "she lies dead", "he has died".
DEAD_PREDICATE = re.compile(
    r"^[\s,]*(?:(?!(?:the|a|an|of|in|to|his|her|their|its|what|who|that|believes?|thinks?|says?)\b)[\w'’-]+\s+){0,2}?(?:(?:is|was|has been|had been|lies|lay|were|are|has|had|now)\s+)*"
    r"(?:dead|died|killed|slain|murdered|drowned|perished|hanged|buried)\b(?!\s+(?:streets?|city|quarter|bells?|"
    r"deeds?|men|town|houses?|lanes?))",
    re.IGNORECASE,
)


def _dead(ctx: GuardContext, corpus: _Corpus) -> dict[str, Item]:
    """The characters an item says are dead: a death predicate right after the character (or, in the character's
    own entry, "he" / "she"), not hedged ("believed drowned" is not dead)."""
    dead: dict[str, Item] = {}
    for item, _terms in corpus.items:
        if not DEATH.search(item.text):
            continue
        own = ctx.index.character_entries.get(item.ref.get("entry_id", "")) if item.layer == "lore" else None
        subjects = [(n.title, n.end) for n in names_in(ctx.index, item.text)]
        if own:
            subjects += [(own, m.end()) for m in re.finditer(r"\b(he|she)\b", item.text, re.IGNORECASE)]
        for title, end in subjects:
            if _possessive_before(item.text, end):
                continue
            match = DEAD_PREDICATE.match(item.text[end:])
            if match and not HEDGE.search(match.group(0)):
                dead.setdefault(fold(title), item)
                break
    return dead


def _possessive_before(text: str, end: int) -> bool:
    return text[end : end + 2] in ("'s", "’s")


def _place_names(ctx: GuardContext) -> dict[str, str]:
    """Every name of a place entry (title, keys), folded, to the place's title."""
    names = {}
    for entry in ctx.entries.values():
        if entry["kind"] in ("place", "location"):
            for name in [entry["title"], *[k for k in entry["keys"] or [] if isinstance(k, str)]]:
                if name and not name.startswith("/"):
                    names[fold(name)] = entry["title"]
    return names


def _place_of(text: str, places: dict[str, str]) -> str:
    for name in sorted(places, key=len, reverse=True):
        if re.search(rf"\b{LOCATIVE}(?:the\s+)?{re.escape(name)}\b", text, re.IGNORECASE):
            return places[name]
        if name.startswith("the ") and re.search(rf"\b{LOCATIVE}{re.escape(name)}\b", text, re.IGNORECASE):
            return places[name]
    return ""


def _after_subject(text: str, who: str, ctx: GuardContext, words: int = 5) -> str:
    """The few words after the sentence's subject `who` (where "stands in the bell-loft" says where they are)."""
    for span in names_in(ctx.index, text):
        if span.title == who:
            return " ".join(text[span.end :].split()[: words + 3])
    return ""


def contradiction_candidates(ctx: GuardContext, sentences: list[Sentence]) -> list[Finding]:
    """Return the possible contradictions of the narration (the module's three searches), strongest first."""
    corpus = _Corpus(ctx)
    candidates: list[tuple[float, Finding]] = []
    dead = _dead(ctx, corpus)
    places = _place_names(ctx)
    row = ctx.view.row(ctx.horizon)
    scene_place = (places.get(fold(row.scene)) or _place_of("in " + row.scene, places)) if row and row.scene else ""
    present = {fold(c) for c in (row.characters if row else [])}
    moved = ctx.scene_moves(sentences)
    for sentence in sentences:
        who = sentence.speaker
        if who and sentence.role != "narration" and fold(who) in dead:
            item = dead[fold(who)]
            candidates.append(
                (
                    10.0,
                    Finding(
                        kind="contradiction",
                        sentence=sentence.text,
                        character=who,
                        item=item,
                        verdict="candidate",
                        why=f"{who} {'speaks' if sentence.role == 'says' else 'acts'}, but {item.label()} says {who} is dead",
                        score={"search": "dead acts"},
                    ),
                )
            )
            continue
        if (
            who
            and scene_place
            and fold(who) in present
            and sentence.role == "acts"
            and not sentence.arrives
            and not moved
        ):
            place = _place_of(_after_subject(sentence.text, who, ctx), places)
            if place and place != scene_place and not MOVES.search(sentence.text):
                item = Item(
                    "presence",
                    {"turn_id": ctx.horizon, "scene": row.scene},
                    f"At turn {ctx.horizon}, {who} is present at {row.scene}.",
                    ctx.horizon,
                )
                candidates.append(
                    (
                        8.0,
                        Finding(
                            kind="contradiction",
                            sentence=sentence.text,
                            character=who,
                            item=item,
                            verdict="candidate",
                            why=f"the narration puts {who} in {place}, but at turn {ctx.horizon} {who} is at {row.scene}",
                            score={"search": "two places"},
                        ),
                    )
                )
                continue
        if sentence.said.rstrip("”\"' ").endswith("?"):
            continue  # a question asserts nothing
        terms = terms_of(sentence.text)
        for weight, item, item_terms in corpus.search(terms, ctx.name_terms):
            opposed = _flip(sentence.text, terms, item, item_terms)
            if opposed and not _same_thing(ctx, sentence.text, terms, item, item_terms):
                continue
            if opposed:
                candidates.append(
                    (
                        weight,
                        Finding(
                            kind="contradiction",
                            sentence=sentence.text,
                            character=who,
                            item=item,
                            verdict="candidate",
                            why=f"it may say the opposite of {item.label()} (turn {item.turn}): {opposed}",
                            score={"search": "flip", "weight": round(weight, 2), "shared": sorted(terms & item_terms)},
                        ),
                    )
                )
                break
    candidates.sort(key=lambda c: -c[0])
    return [finding for _weight, finding in candidates]


def _same_thing(ctx: GuardContext, text: str, terms: set[str], item: Item, item_terms: set[str]) -> bool:
    similarity = ctx.similarity(text, item.text)
    if similarity is None:
        return len((terms & item_terms) - ctx.name_terms) >= FLIP_TERMS_WITHOUT_EMBEDDER
    return similarity >= FLIP_SIMILAR


JUDGE_SYSTEM = (
    "You check a story's continuity. Each numbered candidate sets a new sentence of the story beside an "
    "established item: the Lore Book's canon (turn 0), a fact or a belief, with its id and turn. Decide whether the "
    "sentence contradicts the item, that is, both cannot be true: a dead character acting, someone in two places at "
    "once, a fact reversed. A character lying, guessing or remembering, or a change the sentence itself explains, is "
    'not a contradiction. Answer only JSON: {"verdicts": [{"candidate": 1, "contradiction": true, '
    '"item": "<the item\'s id exactly as given>", "turn": <the item\'s turn as given>, "why": "<one short '
    'sentence>"}]}, one verdict per candidate.'
)
JUDGE_SCHEMA = {
    "type": "object",
    "properties": {
        "verdicts": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "candidate": {"type": "integer"},
                    "contradiction": {"type": "boolean"},
                    "item": {"type": "string"},
                    "turn": {"type": "integer"},
                    "why": {"type": "string"},
                },
                "required": ["candidate", "contradiction", "item", "turn", "why"],
            },
        }
    },
    "required": ["verdicts"],
}
LEAK_SYSTEM = (
    "You check a story for leaks. Each numbered candidate sets a sentence of the story beside a secret (with its id "
    "and turn) and names the character who says or does it, who does not know that secret. Decide whether the "
    'sentence reveals or hints at the secret. Answer only JSON: {"verdicts": [{"candidate": 1, "contradiction": '
    'true, "item": "<the id exactly as given>", "turn": <the turn as given>, "why": "<one short sentence>"}]}'
    ' ("contradiction": true when it leaks).'
)


def judge_prompt(findings: list[Finding]) -> str:
    lines = []
    for number, finding in enumerate(findings, start=1):
        who = f" ({finding.character})" if finding.character else ""
        lines.append(
            f"{number}. Sentence{who}: “{finding.sentence}”\n   Item {finding.item.label()} (turn "
            f"{finding.item.turn}): “{_clip(finding.item.text)}”"
        )
    return "\n".join(lines)


def _clip(text: str, limit: int = 400) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def judge(llm, findings: list[Finding], *, system: str = JUDGE_SYSTEM, confirmed: str = "confirmed") -> int:
    """Ask the model about `findings` in one call; set each one's verdict and reason from a verdict that cites its
    item and turn. Return the number of findings judged. Raise the LLM's errors (the caller's spend guard)."""
    from studio.memory.llm.base import ask
    from studio.memory.llm.parsing import scan_items

    if not findings:
        return 0
    response = ask(llm, system=system, prompt=judge_prompt(findings), operation="guard", schema=JUDGE_SCHEMA)
    judged = 0
    for verdict in scan_items(response.text, "verdicts").items:
        if not isinstance(verdict, dict):
            continue
        try:
            number = int(verdict.get("candidate"))
        except (TypeError, ValueError):
            continue
        if not 1 <= number <= len(findings):
            continue
        finding = findings[number - 1]
        cites = str(verdict.get("item", "")).strip().casefold() == finding.item.label().casefold()
        try:
            cites = cites and int(verdict.get("turn")) == int(finding.item.turn or 0)
        except (TypeError, ValueError):
            cites = False
        if not cites or not isinstance(verdict.get("contradiction"), bool):
            finding.judge = "the model's verdict did not cite the item and its turn: not judged"
            continue
        finding.verdict = confirmed if verdict["contradiction"] else "rejected"
        finding.judge = str(verdict.get("why", "")).strip()[:500]
        judged += 1
    return judged

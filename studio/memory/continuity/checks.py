"""The deterministic checks: leaks (a character says what they cannot know) and presence (off scene).

`GuardContext` reads, once per check, what the checks compare a narration with at the save's
turn N (the horizon): who knows what (`KnowledgeView`), the Lore Book, the facts, the turns'
narratives, who is on scene. Nothing is stored.

**Leaks.** For each sentence said or done by a character C (`text.read_narration`), the items C
does not know at N: a secret Lore Book entry not known to C (`known_by`, reveals), a fact of a
turn C did not witness and was not told, the narrative of a turn C did not witness. A turn with
no presence row says nothing about who witnessed it: its facts and narrative are never counted
as unknown. A sentence of the narration itself is told to the player character: it is checked
against the secrets the player character does not know.

A sentence *carries* an item through the item's distinctive terms: the item's index terms
(`retrieval.lexical.index_terms`, inflections folded) that C could not have from anything C
knows (the public Lore Book, the secrets, facts and turns C knows, the player's input, what was
said on scene earlier in this narration) and that are no character's name. It carries the item
when it says `STRONG_HITS` of them (3 for a whole turn's narrative), or one fewer when its
meaning is close to the item's (cosine of the embedder's vectors with the item, or with one of its
sentences: a leak retells one sentence of a secret; `LeakRule`). Echoing the
player's words is never a leak: they are the player's. One finding per sentence: its best item.

**Presence.** A character who says or does something while not on scene: on scene are the
characters present at N (the presence row), the player character when they act, those the
player's input names, and whoever arrives in the narration ("Kael steps in"); a save that
records no presence at N is not checked.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import functools
import re

import numpy as np

from studio.memory.continuity.findings import Finding, Item
from studio.memory.continuity.text import MOVES, Sentence, split_sentences
from studio.memory.knowledge.derive import KnowledgeView
from studio.memory.knowledge.names import fold
from studio.memory.retrieval.lexical import index_terms

__all__ = ["GuardContext", "LeakRule", "check_leaks", "check_presence"]

MAX_TURNS_READ = 2000  # the newest turns whose narratives a check reads (a character's knowledge, unwitnessed turns)


@dataclass(frozen=True)
class LeakRule:
    """How much a sentence must carry of an item to be a leak (bench/continuity.py chose these)."""

    strong_hits: int = 2  # distinctive terms of a lore entry, fact or belief said
    strong_hits_turn: int = 3  # of a whole turn's narrative (longer, more chance words)
    similar: float = 0.4  # cosine at which one fewer distinctive term is enough
    # A secret or a fact recited in the item's own public words (every term of it known from elsewhere: the tide
    # code is "the governor", "the drowned bells", "the lowest ebb") is carried by its meaning alone: at this cosine,
    # with this many of the item's terms said.
    similar_alone: float = 0.7
    shared_alone: int = 3
    min_term_chars: int = 3


RULE = LeakRule()


@functools.lru_cache(maxsize=8192)  # the same last turns' narratives are read at every check: their terms kept
def terms_of(text: str) -> frozenset[str]:
    return frozenset(t for t in index_terms(text or "") if len(t) >= RULE.min_term_chars)


@dataclass
class _Knows:
    terms: set[str] = field(default_factory=set)
    # (item, why unknown, its distinctive terms: none of what the character knows, no name; all its terms)
    unknown: list[tuple[Item, str, set[str], set[str]]] = field(default_factory=list)


class GuardContext:
    """What the checks read of a save at turn `horizon` (one read of each table), and the embedder."""

    def __init__(self, game_save, *, horizon: int, player_input: str = "", index=None, embedder=None):
        from studio.memory.chapters.story import turn_texts
        from studio.memory.knowledge.selectors import book_entries
        from studio.memory.models import Fact

        self.save = game_save
        self.horizon = horizon
        self.player_input = player_input or ""
        self.view = KnowledgeView(game_save, horizon=horizon, index=index)
        self.index = self.view.index
        self.embedder = embedder
        self.entries = book_entries(game_save.universe_id)
        self.facts = list(
            Fact.objects.filter(game_save_id=game_save.pk, turn_id__lte=horizon)
            .order_by("turn_id", "id")
            .values("id", "turn_id", "statement", "entities")
        )
        self.turns = turn_texts(game_save, range(max(1, horizon - MAX_TURNS_READ + 1), horizon + 1))
        self.input_terms = terms_of(self.player_input)
        self.name_terms: set[str] = set()
        for name in list(self.index.characters) + list(self.index.parts) + [fold(t) for t in self.index.titles]:
            self.name_terms |= terms_of(name)
        self.public_terms: set[str] = set()
        for entry in self.entries.values():
            if entry["known_by"] is None:
                self.public_terms |= terms_of(f"{entry['title']} {entry['text']} {' '.join(_plain(entry['keys']))}")
        self._knows: dict[str, _Knows] = {}
        self._vectors: dict[str, np.ndarray] = {}

    # -- who knows what -------------------------------------------------------------------------

    def recorded(self, turn: int) -> bool:
        """Whether turn `turn` records who was present (else nothing is known about who witnessed it)."""
        return self.view.recorded(turn)

    def knows(self, character: str) -> _Knows:
        """Return what `character` knows (its terms) and the items they do not know, read once."""
        key = fold(character)
        if key in self._knows:
            return self._knows[key]
        view, knows = self.view, _Knows(terms=set(self.public_terms) | self.input_terms)
        view.prefetch([fact["turn_id"] for fact in self.facts] + list(self.turns))  # one read, not one a turn
        for entry_id, entry in self.entries.items():
            if entry["known_by"] is None:
                continue
            text = f"{entry['title']}: {entry['text']}"
            knowing = view.entry(character, entry_id)
            if knowing.known:
                knows.terms |= terms_of(text)
            else:
                knows.unknown.append(
                    (
                        Item("lore", {"entry_id": entry_id, "title": entry["title"]}, text, 0),
                        knowing.why,
                        terms_of(text),
                    )
                )
        for fact in self.facts:
            knowing = view.fact(character, fact["id"], fact["turn_id"])
            if knowing.known or not self.recorded(fact["turn_id"]):
                knows.terms |= terms_of(fact["statement"])
            else:
                knows.unknown.append(
                    (
                        Item("fact", {"fact_id": fact["id"]}, fact["statement"], fact["turn_id"]),
                        knowing.why,
                        terms_of(fact["statement"]),
                    )
                )
        for turn, narrative in self.turns.items():
            knowing = view.narrative(character, turn)
            if knowing.known or not self.recorded(turn):
                knows.terms |= terms_of(narrative)
            else:
                knows.unknown.append(
                    (Item("turn", {"turn_id": turn}, narrative, turn), knowing.why, terms_of(narrative))
                )
        known_terms = knows.terms | self.name_terms
        knows.unknown = [(item, why, item_terms - known_terms, item_terms) for item, why, item_terms in knows.unknown]
        self._knows[key] = knows
        return knows

    def on_scene(self) -> list[str] | None:
        """Who is on scene for the next turn, or None when the save records no presence at the horizon."""
        from studio.memory.knowledge.pov import on_scene

        if not self.recorded(self.horizon):
            return None
        return [p["name"] for p in on_scene(self.view, pov=None, query_text=self.player_input, focus_terms=[])]

    # -- places --------------------------------------------------------------------------------

    def places(self) -> dict[str, str]:
        """Every name of a place entry of the Lore Book (title, keys), folded, to the place's title."""
        if not hasattr(self, "_places"):
            self._places = {}
            for entry in self.entries.values():
                if entry["kind"] in ("place", "location"):
                    for name in [entry["title"], *_plain(entry["keys"])]:
                        if name.strip():
                            self._places[fold(name)] = entry["title"]
        return self._places

    def places_named(self, text: str) -> set[str]:
        """The places `text` names (titles, keys; whole words)."""
        return {
            title
            for name, title in self.places().items()
            if re.search(rf"(?<!\w){re.escape(name)}(?!\w)", text or "", re.IGNORECASE)
        }

    def scene_moves(self, sentences: list[Sentence]) -> bool:
        """Whether the input or the narration goes to another place than the scene's (a verb of going and a place of
        the book: "I climb to Bellspire"): then who is on scene, and where, is not known."""
        here = self.scene_place()
        for text in [self.player_input, *(s.text for s in sentences)]:
            if MOVES.search(text or "") and self.places_named(text) - {here}:
                return True
        return False

    def scene_place(self) -> str:
        """The place of the scene at the horizon (the presence row's scene as a place of the book), or ""."""
        row = self.view.row(self.horizon)
        if not row or not row.scene:
            return ""
        return self.places().get(fold(row.scene)) or next(iter(sorted(self.places_named(row.scene))), "")

    # -- meaning -------------------------------------------------------------------------------

    def similarity(self, a: str, b: str) -> float | None:
        """Cosine of the embedder's vectors of `a` and `b` (None without an embedder)."""
        if self.embedder is None:
            return None
        missing = [t for t in (a, b) if t not in self._vectors]
        if missing:
            vectors = np.asarray(self.embedder.encode(missing), dtype=float)
            for text, vector in zip(missing, vectors):
                norm = float(np.linalg.norm(vector)) or 1.0
                self._vectors[text] = vector / norm
        return float(np.dot(self._vectors[a], self._vectors[b]))

    def closeness(self, sentence: str, item: Item) -> float | None:
        """How close `sentence` is in meaning to the item: the best cosine with the item whole or one of its
        sentences (a leak retells one sentence of a secret, rarely all of it). None without an embedder."""
        if self.embedder is None:
            return None
        parts = [item.text] + ([p for p in split_sentences(item.text) if len(p) > 20] if item.layer != "turn" else [])
        missing = [t for t in [sentence, *parts] if t not in self._vectors]
        if missing:
            vectors = np.asarray(self.embedder.encode(missing), dtype=float)
            for text, vector in zip(missing, vectors):
                self._vectors[text] = vector / (float(np.linalg.norm(vector)) or 1.0)
        return max(float(np.dot(self._vectors[sentence], self._vectors[p])) for p in parts)


def _plain(keys) -> list[str]:
    return [k for k in keys or [] if isinstance(k, str) and not k.startswith("/") and "{{" not in k]


def _audience(ctx: GuardContext, sentence: Sentence) -> tuple[str, str]:
    """Who a sentence's knowledge must come from, and how to say it: its speaker, or the player for the narration."""
    if sentence.speaker:
        return sentence.speaker, f"{sentence.speaker} {'says' if sentence.role == 'says' else 'does'} it"
    if ctx.index.player:
        return ctx.index.player, f"the narration tells it to {ctx.index.player}"
    return "", ""


def _carries(
    ctx: GuardContext, sentence: Sentence, said_terms: set[str], item: Item, distinctive: set[str], item_terms: set[str]
) -> tuple[tuple, set[str], float | None] | None:
    """Whether the sentence carries the item (the module's rule): (rank, the distinctive terms said, cosine) or None."""
    hits = said_terms & distinctive
    needed = RULE.strong_hits_turn if item.layer == "turn" else RULE.strong_hits
    if len(hits) >= needed:
        return (len(hits), 0.0), hits, None
    shared = said_terms & item_terms
    if hits and len(hits) == needed - 1 or (item.layer != "turn" and len(shared) >= RULE.shared_alone):
        similarity = ctx.closeness(sentence.said, item)
        if similarity is None:
            return None
        if hits and len(hits) == needed - 1 and similarity >= RULE.similar:
            return (len(hits), similarity), hits, similarity
        if item.layer != "turn" and len(shared) >= RULE.shared_alone and similarity >= RULE.similar_alone:
            return (len(hits), similarity), hits or shared, similarity
    return None


def check_leaks(ctx: GuardContext, sentences: list[Sentence]) -> list[Finding]:
    """Return a finding for each sentence that carries an item its speaker (or, for the narration, the player
    character) does not know (the module's rule); an item is reported once per speaker, at its first sentence."""
    findings: list[Finding] = []
    heard: set[str] = set()  # what was said on scene earlier in this narration: known from now on
    reported: set[tuple[str, str]] = set()
    for sentence in sentences:
        who, how = _audience(ctx, sentence)
        said_terms = terms_of(sentence.said) - heard - ctx.input_terms
        best = None
        if who and said_terms:
            for item, why_unknown, distinctive, item_terms in ctx.knows(who).unknown:
                if not sentence.speaker and item.layer != "lore":
                    continue  # the narration may tell of turns the player missed: only secrets are checked
                carried = _carries(ctx, sentence, said_terms, item, distinctive, item_terms)
                if carried is not None and (best is None or carried[0] > best[0]):
                    best = (carried[0], item, why_unknown, carried[1], carried[2])
        if best is not None:
            _rank, item, why_unknown, hits, similarity = best
            if (fold(who), item.label()) not in reported:
                reported.add((fold(who), item.label()))
                findings.append(
                    Finding(
                        kind="leak",
                        sentence=sentence.text,
                        character=sentence.speaker,
                        item=item,
                        why=f"{how}, but {who} does not know {item.label()} ({why_unknown}); it says "
                        + ", ".join(f"“{t}”" for t in sorted(hits))
                        + (f" (meaning {similarity:.2f} alike)" if similarity is not None else ""),
                        score={
                            "hits": sorted(hits),
                            "similarity": None if similarity is None else round(similarity, 3),
                            "audience": who,
                            "how": sentence.how,
                        },
                    )
                )
            continue
        heard |= terms_of(sentence.said)
    return findings


def check_presence(ctx: GuardContext, sentences: list[Sentence]) -> list[Finding]:
    """Return a finding for the first sentence in which each character off scene says or does something."""
    scene = ctx.on_scene()
    if scene is None:
        return []
    if ctx.scene_moves(sentences):
        return []  # the scene moves to another place: who is there is not known
    on = {fold(name) for name in scene}
    if ctx.index.player and ctx.view.player:
        on.add(fold(ctx.index.player))  # the player character acts in the turn being narrated
    row = ctx.view.row(ctx.horizon)
    listed = ", ".join(row.characters) if row and row.characters else "nobody"
    item = Item(
        "presence",
        {"turn_id": ctx.horizon, "scene": getattr(row, "scene", "")},
        f"Present at turn {ctx.horizon}: {listed}.",
        ctx.horizon,
    )
    findings, reported = [], set()
    for sentence in sentences:
        who = sentence.speaker
        if not who or sentence.role == "narration":
            continue
        if sentence.arrives:
            on.add(fold(who))
            continue
        if fold(who) in on or fold(who) in reported:
            continue
        reported.add(fold(who))
        findings.append(
            Finding(
                kind="presence",
                sentence=sentence.text,
                character=who,
                item=item,
                why=f"{who} {'speaks' if sentence.role == 'says' else 'acts'} but is not on scene (present at turn "
                f"{ctx.horizon}: {listed}) and does not arrive in the narration",
                score={"how": sentence.how},
            )
        )
    return findings

"""What a character knows at turn N, derived from the rows up to N, with the reason why.

Nothing here is stored: `KnowledgeView(save, horizon)` reads the presence rows, the reveals
and the Lore Book's `known_by` once, then answers, for a character and an item, whether
the character knows it and why (a `Knowing`). The rules:

- **presence**: the characters the presence rows name at t, and the player character in every
  turn t they acted in (a turn with a player input), whether or not the game listed them
  (`CharacterIndex.player_on_scene`, the universe's `pov_player_on_scene`; on by default);
- a **fact** of turn t: known to the characters present at t (its witnesses), and to each
  character a reveal up to N names for it ("told to Mira by Kael at turn 20");
- a **narrative** turn t: known to the characters present at t;
- a **Lore Book entry**: `known_by` None = known to everyone; a list = the characters it
  names, directly or through a group entry they are linked with (a faction); [] = nobody
  (a narrator-only secret); plus each character a reveal up to N names for it;
- a **belief**: a character's own (`holder`) is theirs alone; the world's is known to a
  character who knows every one of its source facts; a belief without sources is the
  narrator's;
- a **mental model** is the narrator's synthesis and is not attributed to a character.

A rewind to N deletes the rows after N and a fork copies those up to N, so the view at N is
the same before and after either: there is nothing else to keep in step.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from studio.memory.chapters.story import acting_turns
from studio.memory.knowledge.models import Presence, Reveal
from studio.memory.knowledge.names import CharacterIndex, character_index, fold
from studio.memory.knowledge.presence import presence_by_turn

__all__ = ["Knowing", "KnowledgeView"]


@dataclass(frozen=True)
class Knowing:
    known: bool
    why: str
    learned_turn: int | None = None  # the first turn the character knew it (None: not known, or always)


class KnowledgeView:
    """Who knows what in one save as of turn `horizon`.

    The reveals and the Lore Book's `known_by` are read once. Presence (the rows, and the
    turns the player acted in) is read for the turns asked about, a batch at a time
    (`prefetch`; every per-turn answer loads its turn if needed), so a turn's memory context
    reads the rows of the turns it shows, not the save's whole history; the whole-save
    attributes (`presence`, `present`, `acting`, `characters()`: pages, lore health) read
    every row up to the horizon once.
    """

    def __init__(self, save, *, horizon: int, index: CharacterIndex | None = None):
        from studio.world.models import LoreEntry

        self.save = save
        self.horizon = horizon
        self.index = index or character_index(save.universe, save=save)
        # The player character witnesses every turn they act in (the game need not list them).
        self.player = self.index.player if self.index.player_on_scene else ""
        self._rows: dict[int, Presence] = {}  # the presence rows of the turns looked up
        self._acting: set[int] = set()  # of the turns looked up, those the player acted in
        self._looked_up: set[int] = set()
        self._names: dict[int, frozenset[str]] = {}  # `_present` of the turns asked
        self._whole = False
        self.fact_reveals: dict[int, list[Reveal]] = defaultdict(list)
        self.entry_reveals: dict[str, list[Reveal]] = defaultdict(list)
        self.reveals = list(Reveal.objects.filter(game_save_id=save.pk, turn_id__lte=horizon).order_by("turn_id", "id"))
        for reveal in self.reveals:
            if reveal.fact_id:
                self.fact_reveals[reveal.fact_id].append(reveal)
            else:
                self.entry_reveals[reveal.entry_id].append(reveal)
        self.known_by: dict[str, list | None] = dict(
            LoreEntry.objects.filter(universe_id=save.universe_id).values_list("entry_id", "known_by")
        )

    # -- presence ---------------------------------------------------------------------------

    def _need(self, turn: int) -> None:
        """Look turn `turn` up unless it was (the guard asks of each of 2,000 turns per character: no set built)."""
        if not self._whole and turn not in self._looked_up:
            self.prefetch([turn])

    def prefetch(self, turns) -> None:
        """Read the presence of `turns` not looked up yet (one query each for rows and acting turns)."""
        if self._whole:
            return
        wanted = sorted({int(t) for t in turns if 0 < int(t) <= self.horizon} - self._looked_up)
        if not wanted:
            return
        self._rows.update(presence_by_turn(self.save, turn_ids=wanted))
        if self.player:
            self._acting.update(acting_turns(self.save, horizon=self.horizon, among=wanted))
        self._looked_up.update(wanted)

    def _read_whole(self) -> None:
        if self._whole:
            return
        self._rows = {
            r.turn_id: r for r in Presence.objects.filter(game_save_id=self.save.pk, turn_id__lte=self.horizon)
        }
        self._acting = acting_turns(self.save, horizon=self.horizon) if self.player else set()
        self._names.clear()
        self._whole = True

    def row(self, turn: int) -> Presence | None:
        """The presence row of `turn` (None: none recorded), reading that turn only."""
        self._need(turn)
        return self._rows.get(turn)

    def recorded(self, turn: int) -> bool:
        """Whether turn `turn` has a presence row (`turn in presence`, reading that turn only)."""
        return self.row(turn) is not None

    @property
    def presence(self) -> dict[int, Presence]:
        """Every presence row up to the horizon, by turn (reads them all)."""
        self._read_whole()
        return self._rows

    @property
    def acting(self) -> set[int]:
        """Every turn up to the horizon the player acted in (reads them all)."""
        self._read_whole()
        return self._acting

    @property
    def present(self) -> dict[int, frozenset[str]]:
        """Every turn up to the horizon with someone present: the folded names (reads them all)."""
        self._read_whole()
        return {turn: self._present(turn) for turn in self._rows.keys() | self._acting}

    def _present(self, turn: int) -> frozenset[str]:
        """The folded names present at `turn` (the player if they acted in it); empty when nobody is recorded.
        Kept per turn once looked up (a turn's rows do not change within a view)."""
        self._need(turn)
        names = self._names.get(turn)
        if names is None:
            row = self._rows.get(turn)
            folded = [fold(c) for c in row.characters] if row else []
            if turn in self._acting:
                folded.append(fold(self.player))
            names = self._names[turn] = frozenset(folded)
        return names

    def present_at(self, turn: int) -> list[str]:
        """Return who was present at `turn`: the presence row's characters, and the player if they acted in it."""
        self._need(turn)
        row = self._rows.get(turn)
        names = list(row.characters) if row else []
        if turn in self._acting and fold(self.player) not in {fold(n) for n in names}:
            names.append(self.player)
        return names

    def has_data(self) -> bool:
        """True when the save records presence or reveals, or its Lore Book has a `known_by`."""
        if self.reveals or any(v is not None for v in self.known_by.values()):
            return True
        if self._whole:
            return bool(self._rows)
        return (
            bool(self._rows) or Presence.objects.filter(game_save_id=self.save.pk, turn_id__lte=self.horizon).exists()
        )

    # -- items ------------------------------------------------------------------------------

    def _revealed(self, reveals: list[Reveal], character: str) -> Reveal | None:
        return next((r for r in reveals if fold(r.character) == fold(character)), None)

    @staticmethod
    def _told(reveal: Reveal, character: str) -> str:
        by = f" by {reveal.told_by}" if reveal.told_by else ""
        return f"told to {character}{by} at turn {reveal.turn_id}"

    def witnessed(self, character: str, turn: int) -> Knowing:
        present = self._present(turn) if 0 < turn <= self.horizon else frozenset()
        if fold(character) in present:
            row = self._rows.get(turn)
            if (
                turn in self._acting
                and fold(character) == fold(self.player)
                and not (row and fold(character) in {fold(c) for c in row.characters})
            ):
                return Knowing(True, f"{character} acted in turn {turn} (the player character)", turn)
            return Knowing(True, f"{character} was present at turn {turn}", turn)
        if turn not in self._rows and turn not in self._acting:
            return Knowing(False, f"nobody is recorded present at turn {turn}")
        return Knowing(False, f"{character} was not present at turn {turn}")

    def fact(self, character: str, fact_id: int, fact_turn: int) -> Knowing:
        seen = self.witnessed(character, fact_turn)
        if seen.known:
            return seen
        reveal = self._revealed(self.fact_reveals.get(fact_id, []), character)
        if reveal is not None:
            return Knowing(True, self._told(reveal, character), reveal.turn_id)
        return Knowing(False, seen.why + " and was not told it" if "not present" in seen.why else seen.why)

    def narrative(self, character: str, turn: int) -> Knowing:
        return self.witnessed(character, turn)

    def entry_is_secret(self, entry_id: str) -> bool:
        return self.known_by.get(entry_id) is not None

    def entry(self, character: str, entry_id: str) -> Knowing:
        known_by = self.known_by.get(entry_id)
        if known_by is None:
            return Knowing(True, "known to everyone (no known_by)")
        for item in known_by:
            members, group = self.index.members(item)
            if fold(character) in members:
                return Knowing(
                    True,
                    f"known_by names {group} ({character} is linked to it)" if group else f"known_by names {character}",
                )
        reveal = self._revealed(self.entry_reveals.get(entry_id, []), character)
        if reveal is not None:
            return Knowing(True, "secret; " + self._told(reveal, character), reveal.turn_id)
        return Knowing(False, self.secret_note(entry_id))

    def secret_note(self, entry_id: str) -> str:
        """Say who knows a secret entry: "secret (known by Kael); revealed to Mira at turn 20"."""
        known_by = self.known_by.get(entry_id) or []
        head = f"secret (known by {', '.join(known_by)})" if known_by else "secret (narrator only)"
        told = [f"revealed to {r.character} at turn {r.turn_id}" for r in self.entry_reveals.get(entry_id, [])]
        return head + ("; " + "; ".join(told) if told else "")

    def belief(self, character: str, *, holder: str, sources: list[dict]) -> Knowing:
        if holder:
            if fold(holder) == fold(character):
                return Knowing(True, f"{character}'s own belief")
            return Knowing(False, f"held by {holder}, not {character}")
        if not sources:
            return Knowing(False, "a world belief without source facts: the narrator's")
        for source in sources:
            turn = int(source.get("turn_id") or 0)
            knowing = self.fact(character, int(source.get("fact_id") or 0), turn)
            if not knowing.known:
                return Knowing(False, f"source fact from turn {turn}: {knowing.why}")
        return Knowing(True, f"{character} knows its {len(sources)} source fact{'s' if len(sources) != 1 else ''}")

    # -- whole-save views (pages, bench) ----------------------------------------------------

    def characters(self) -> list[str]:
        """Every character the save or its book knows of: the book's, then those only named in rows."""
        names = self.index.all_characters()
        seen = {fold(n) for n in names}
        for row in self.presence.values():
            for name in row.characters:
                if fold(name) not in seen:
                    names.append(name)
                    seen.add(fold(name))
        for reveal in self.reveals:
            if fold(reveal.character) not in seen:
                names.append(reveal.character)
                seen.add(fold(reveal.character))
        return names

"""Who knows what: presence per turn and reveal events, both keyed by save and turn.

Imported by `studio.memory.models` (the memory app's models module), so the tables belong
to the `memory` app. Nothing here is a copy of knowledge: what a character knows at turn N
is derived from these rows up to N (`studio.memory.knowledge.derive`), so a rewind (delete
after N) and a fork (copy up to N) keep knowledge exact with no extra code.

- `Presence`: one row per (save, turn) at most: the characters in the scene at that turn,
  by canonical name (a Lore Book character's title when the name resolves through its
  title or keys; else the name as given), with where the row came from. No row: nobody is
  known to be present (a scene change stops the carry, and an old save has none).
- `Reveal`: at turn N, a fact (`fact`) or a Lore Book entry (`entry_id`) becomes known to
  `character`, told by `told_by` (may be empty), from a source (playtester, API, extractor).
"""

from __future__ import annotations

from django.db import models


class PresenceSource(models.TextChoices):
    """Where a presence row came from, in order of authority (an automatic write never
    replaces a row of higher authority; the playtester's edit replaces any)."""

    STATE = "state", "Game state (`present` key)"
    PLAYTESTER = "playtester", "Set by hand"
    EXTRACTOR = "extractor", "Living-mode extractor"
    CARRIED = "carried", "Carried from the previous turn"


PRESENCE_AUTHORITY = {
    PresenceSource.STATE: 4,
    PresenceSource.PLAYTESTER: 3,
    PresenceSource.EXTRACTOR: 2,
    PresenceSource.CARRIED: 1,
}


class RevealSource(models.TextChoices):
    PLAYTESTER = "playtester", "Added by hand"
    API = "api", "Game engine (API)"
    EXTRACTOR = "extractor", "Living-mode extractor"
    STATE = "state", "Game state (`reveals` key)"


class Presence(models.Model):
    game_save = models.ForeignKey("world.Save", on_delete=models.CASCADE, related_name="presence_rows")
    turn_id = models.PositiveIntegerField()
    characters = models.JSONField(default=list, blank=True, help_text="Canonical names of the characters in the scene.")
    source = models.CharField(max_length=12, choices=PresenceSource.choices, default=PresenceSource.STATE)
    scene = models.CharField(max_length=300, blank=True, help_text="The state's location at this turn, if it had one.")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["game_save", "turn_id"]
        constraints = [models.UniqueConstraint(fields=["game_save", "turn_id"], name="presence_unique_turn")]
        verbose_name_plural = "presence"

    def __str__(self) -> str:
        return f"turn {self.turn_id}: {', '.join(self.characters) or 'nobody'} ({self.source})"


class Reveal(models.Model):
    game_save = models.ForeignKey("world.Save", on_delete=models.CASCADE, related_name="reveals")
    turn_id = models.PositiveIntegerField()
    # No cascade: a rewind deletes the facts after N (order 30) and then the reveals after N
    # (order 35), so the preview's count and the rewind's agree; a reveal whose fact a
    # re-extraction replaced names nothing and is skipped by every reader, fork and export.
    fact = models.ForeignKey(
        "memory.Fact", null=True, blank=True, on_delete=models.DO_NOTHING, db_constraint=False, related_name="reveals"
    )
    entry_id = models.CharField(max_length=120, blank=True, help_text="A Lore Book entry's id (when not a fact).")
    character = models.CharField(max_length=200)
    told_by = models.CharField(max_length=200, blank=True)
    source = models.CharField(max_length=12, choices=RevealSource.choices, default=RevealSource.PLAYTESTER)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["game_save", "turn_id", "id"]
        indexes = [models.Index(fields=["game_save", "turn_id"])]
        constraints = [
            models.CheckConstraint(
                condition=(models.Q(fact__isnull=False) & models.Q(entry_id=""))
                | (models.Q(fact__isnull=True) & ~models.Q(entry_id="")),
                name="reveal_fact_xor_entry",
            )
        ]

    def __str__(self) -> str:
        what = f"fact {self.fact_id}" if self.fact_id else f"lore {self.entry_id}"
        return f"turn {self.turn_id}: {what} to {self.character}"

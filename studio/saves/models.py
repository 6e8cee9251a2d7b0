"""Saves: playthroughs of a universe (Event_Log and State_Cache, keyed by save + turn)."""
from __future__ import annotations

import uuid

from django.db import models
from django.db.models.functions import MD5
from django.urls import reverse


def new_save_id() -> str:
    return uuid.uuid4().hex[:16]


class MemoryMode(models.TextChoices):
    CLASSIC = "classic", "Classic (hybrid search only)"
    LIVING = "living", "Living (facts, beliefs, mental models)"


class Save(models.Model):
    universe = models.ForeignKey(
        "universes.Universe", on_delete=models.CASCADE, related_name="saves"
    )
    save_id = models.CharField(max_length=64, unique=True, default=new_save_id)
    name = models.CharField(max_length=200)
    memory_mode = models.CharField(
        max_length=10, choices=MemoryMode.choices, default=MemoryMode.CLASSIC
    )
    beliefs_enabled = models.BooleanField(default=True)
    current_turn = models.PositiveIntegerField(default=0)
    timeline_generation = models.PositiveIntegerField(
        default=0, help_text="Incremented by every rewind; jobs from an older generation write nothing."
    )
    meta = models.JSONField(
        default=dict, blank=True, help_text="Universe_Meta copied at creation."
    )
    forked_from = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="forks"
    )
    fork_turn = models.PositiveIntegerField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    last_activity_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-last_activity_at", "-id"]
        indexes = [models.Index(fields=["universe", "-last_activity_at"])]

    def __str__(self) -> str:
        return f"{self.name} ({self.save_id})"

    def get_absolute_url(self) -> str:
        return reverse("saves:detail", kwargs={"save_id": self.save_id})

    @property
    def is_living(self) -> bool:
        return self.memory_mode == MemoryMode.LIVING


class Event(models.Model):
    """One turn of the Event_Log: the player's input and the narrative it produced."""

    game_save = models.ForeignKey(Save, on_delete=models.CASCADE, related_name="events")
    turn_id = models.PositiveIntegerField()
    player_input = models.TextField(blank=True)
    narrative = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    edited_at = models.DateTimeField(
        null=True, blank=True,
        help_text="When the narrative was last edited by hand (before accepting, or afterwards); none: as narrated or written.",
    )

    class Meta:
        ordering = ["game_save", "turn_id"]
        constraints = [
            models.UniqueConstraint(fields=["game_save", "turn_id"], name="event_unique_turn")
        ]
        # The memory proxy finds where a chat's window starts among a long save's turns by the
        # window's first narrative: an index walk on its digest, not a scan of every turn's
        # text (issue 33). The database computes the digest (PostgreSQL's md5(); Django's MD5
        # on SQLite), so every way a row is written keeps the index.
        indexes = [models.Index(models.F("game_save"), MD5("narrative"), name="event_narrative_md5")]

    def __str__(self) -> str:
        return f"{self.game_save.save_id} turn {self.turn_id}"


class StateCache(models.Model):
    """The game state as it stood after a turn (State_Cache)."""

    game_save = models.ForeignKey(Save, on_delete=models.CASCADE, related_name="states")
    turn_id = models.PositiveIntegerField()
    state = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["game_save", "turn_id"]
        constraints = [
            models.UniqueConstraint(fields=["game_save", "turn_id"], name="state_unique_turn")
        ]
        verbose_name = "state cache"
        verbose_name_plural = "state cache"

    def __str__(self) -> str:
        return f"{self.game_save.save_id} state @ {self.turn_id}"


class DraftStatus(models.TextChoices):
    OPEN = "open", "Open"
    ACCEPTED = "accepted", "Accepted"
    DISCARDED = "discarded", "Discarded"
    UNDONE = "undone", "Undone"  # an accepted turn taken back by Undo: it can be put back until the next turn is accepted


class AlternativeStatus(models.TextChoices):
    PENDING = "pending", "Waiting to stream"
    STREAMING = "streaming", "Streaming"
    DONE = "done", "Done"
    FAILED = "failed", "Failed"
    CANCELLED = "cancelled", "Cancelled"


class NarratorDraft(models.Model):
    """A narration proposed for the save's next turn; nothing is in the Event_Log until accepted.

    `turn_id` is the turn the draft was made for: accepting appends only if the save is
    still one turn short of it (the expected-turn check of `turn_append`).
    """

    game_save = models.ForeignKey(Save, on_delete=models.CASCADE, related_name="narrator_drafts")
    turn_id = models.PositiveIntegerField()
    player_input = models.TextField(blank=True)
    status = models.CharField(max_length=10, choices=DraftStatus.choices, default=DraftStatus.OPEN)
    chosen_number = models.PositiveIntegerField(default=1, help_text="The alternative the playtester chose.")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["game_save", "-id"]
        indexes = [models.Index(fields=["game_save", "status", "turn_id"])]

    def __str__(self) -> str:
        return f"{self.game_save_id} draft for turn {self.turn_id} ({self.status})"


class NarratorAlternative(models.Model):
    """One generated narrative of a draft (regenerate adds another), with what its prompt held."""

    draft = models.ForeignKey(NarratorDraft, on_delete=models.CASCADE, related_name="alternatives")
    number = models.PositiveIntegerField()
    status = models.CharField(max_length=10, choices=AlternativeStatus.choices, default=AlternativeStatus.PENDING)
    text = models.TextField(blank=True)
    error = models.TextField(blank=True)
    model = models.CharField(max_length=200, blank=True)
    finish_reason = models.CharField(max_length=40, blank=True)
    latency_ms = models.PositiveIntegerField(default=0)
    prompt_tokens = models.PositiveIntegerField(default=0)
    completion_tokens = models.PositiveIntegerField(default=0)
    system_prompt = models.TextField(blank=True)
    user_prompt = models.TextField(blank=True)
    context = models.JSONField(default=dict, blank=True, help_text="MemoryContext.as_dict() of the prompt.")
    prefix = models.TextField(
        blank=True, help_text="Continue: the narration this alternative extends (its text starts with it)."
    )
    first_token_ms = models.PositiveIntegerField(null=True, blank=True, help_text="Time to the first streamed text.")
    play_settings = models.JSONField(
        default=dict, blank=True, help_text="The author's note and sampler settings the narration was made with."
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["draft", "number"]
        constraints = [models.UniqueConstraint(fields=["draft", "number"], name="narrator_alternative_unique_number")]

    def __str__(self) -> str:
        return f"alternative {self.number} of {self.draft}"

    @property
    def acceptable(self) -> bool:
        return self.status == AlternativeStatus.DONE and bool(self.text.strip())

    @property
    def stopped_with_text(self) -> bool:
        """A stream stopped (or broken) after some text: editable, accepted only as edited text."""
        return self.status in (AlternativeStatus.CANCELLED, AlternativeStatus.FAILED) and bool(self.text.strip())


class NarratorSnapshot(models.Model):
    """What the narrator saw for an accepted turn: its prompt, memory context, model and usage.

    The prompt is stored as a delta of the nearest earlier snapshot (`prompt_delta`): read it
    with `saves.narrator.snapshots.snapshot_prompt`, never from the two text fields alone.
    """

    game_save = models.ForeignKey(Save, on_delete=models.CASCADE, related_name="narrator_snapshots")
    turn_id = models.PositiveIntegerField()
    player_input = models.TextField(blank=True)
    proposed = models.TextField(blank=True, help_text="The narrative as the model wrote it.")
    edited = models.BooleanField(default=False, help_text="The playtester changed the text before accepting.")
    alternatives = models.PositiveIntegerField(default=1)
    model = models.CharField(max_length=200, blank=True)
    finish_reason = models.CharField(max_length=40, blank=True)
    latency_ms = models.PositiveIntegerField(default=0)
    prompt_tokens = models.PositiveIntegerField(default=0)
    completion_tokens = models.PositiveIntegerField(default=0)
    prompt_chars = models.PositiveIntegerField(default=0)
    system_prompt = models.TextField(blank=True, help_text="The whole system message, or empty when prompt_delta holds it.")
    user_prompt = models.TextField(blank=True, help_text="The whole user message, or empty when prompt_delta holds it.")
    prompt_delta = models.JSONField(
        null=True, blank=True,
        help_text="The prompt as a delta of the save's nearest earlier snapshot: {system, user} operations "
                  "(saves/narrator/snapshots.py); read it with snapshot_prompt().")
    context = models.JSONField(default=dict, blank=True, help_text="MemoryContext.as_dict(): items, reasons, cuts.")
    play_settings = models.JSONField(
        default=dict, blank=True, help_text="The author's note (text, depth) and sampler settings of the narration."
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["game_save", "turn_id"]
        constraints = [
            models.UniqueConstraint(fields=["game_save", "turn_id"], name="narrator_snapshot_unique_turn")
        ]

    def __str__(self) -> str:
        return f"{self.game_save_id} narrator snapshot @ {self.turn_id}"

    def get_absolute_url(self) -> str:
        return reverse("saves:narrator_snapshot", kwargs={"save_id": self.game_save.save_id, "turn_id": self.turn_id})

    @property
    def included_items(self) -> list[dict]:
        return [i for i in (self.context or {}).get("items", []) if i.get("included", True)]

    @property
    def cut_items(self) -> list[dict]:
        return [i for i in (self.context or {}).get("items", []) if not i.get("included", True)]


class PlaySettings(models.Model):
    """A save's play settings: the author's note and the sampler overrides (None: not overridden).

    Not per turn (a rewind keeps them; a fork copies them). What a narration used is kept on
    its alternative and snapshot (`play_settings`).
    """

    game_save = models.OneToOneField(Save, on_delete=models.CASCADE, related_name="play_settings")
    authors_note = models.TextField(blank=True, help_text="Text put into the narrator's prompt at the depth below.")
    authors_note_depth = models.PositiveSmallIntegerField(
        default=1, help_text="Where in the prompt: 0 after the last instruction, 1 just before it, higher earlier."
    )
    temperature = models.FloatField(null=True, blank=True)
    top_p = models.FloatField(null=True, blank=True)
    max_tokens = models.PositiveIntegerField(null=True, blank=True)
    frequency_penalty = models.FloatField(null=True, blank=True)
    repeat_penalty = models.FloatField(null=True, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"play settings of {self.game_save_id}"


# The results of memory tests live in their own package; imported here so Django registers them.
from studio.saves.memory_tests.models import MemoryTestResult  # noqa: E402,F401

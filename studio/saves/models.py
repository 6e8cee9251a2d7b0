"""Saves: playthroughs of a universe: the narrator's drafts, alternatives and snapshots, play settings.

The rows themselves (Save, Event_Log, State_Cache) are the world app's (`studio.world.models`,
below the engine; referred to here by label, so this module does not re-export them); what the
playtesting around them keeps stays here.
"""

from __future__ import annotations

from django.db import models
from django.urls import reverse


class DraftStatus(models.TextChoices):
    OPEN = "open", "Open"
    ACCEPTED = "accepted", "Accepted"
    DISCARDED = "discarded", "Discarded"
    UNDONE = (
        "undone",
        "Undone",
    )  # an accepted turn taken back by Undo: it can be put back until the next turn is accepted


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

    game_save = models.ForeignKey("world.Save", on_delete=models.CASCADE, related_name="narrator_drafts")
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
    checked_digest = models.CharField(
        max_length=64,
        blank=True,
        help_text="SHA-256 of the text the continuity guard last checked (empty: never checked): a text checked "
        "once is not checked again when it is settled.",
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

    game_save = models.ForeignKey("world.Save", on_delete=models.CASCADE, related_name="narrator_snapshots")
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
    system_prompt = models.TextField(
        blank=True, help_text="The whole system message, or empty when prompt_delta holds it."
    )
    user_prompt = models.TextField(blank=True, help_text="The whole user message, or empty when prompt_delta holds it.")
    prompt_delta = models.JSONField(
        null=True,
        blank=True,
        help_text="The prompt as a delta of the save's nearest earlier snapshot: {system, user} operations "
        "(saves/narrator/snapshots.py); read it with snapshot_prompt().",
    )
    context = models.JSONField(default=dict, blank=True, help_text="MemoryContext.as_dict(): items, reasons, cuts.")
    play_settings = models.JSONField(
        default=dict, blank=True, help_text="The author's note (text, depth) and sampler settings of the narration."
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["game_save", "turn_id"]
        constraints = [models.UniqueConstraint(fields=["game_save", "turn_id"], name="narrator_snapshot_unique_turn")]

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

    game_save = models.OneToOneField("world.Save", on_delete=models.CASCADE, related_name="play_settings")
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

"""Saves: playthroughs of a universe (Event_Log and State_Cache, keyed by save + turn)."""
from __future__ import annotations

import uuid

from django.db import models
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

    class Meta:
        ordering = ["game_save", "turn_id"]
        constraints = [
            models.UniqueConstraint(fields=["game_save", "turn_id"], name="event_unique_turn")
        ]

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

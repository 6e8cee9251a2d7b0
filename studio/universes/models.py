"""Universes: the world definition authors edit (Universe_Meta and the Lore Book)."""
from __future__ import annotations

from django.conf import settings
from django.db import models
from django.urls import reverse


class Universe(models.Model):
    name = models.CharField(max_length=200)
    slug = models.SlugField(max_length=80, unique=True)
    description = models.TextField(blank=True)
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="owned_universes",
    )
    members = models.ManyToManyField(
        settings.AUTH_USER_MODEL, blank=True, related_name="member_universes"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def get_absolute_url(self) -> str:
        return reverse("universes:detail", kwargs={"slug": self.slug})

    @property
    def lore_scope_id(self) -> str:
        """The vector-store id under which this universe's own Lore Book is embedded."""
        return f"universe-{self.pk}"


class UniverseMeta(models.Model):
    """One Universe_Meta key/value row (e.g. `belief_mission`, `belief_missions`)."""

    universe = models.ForeignKey(Universe, on_delete=models.CASCADE, related_name="meta")
    key = models.CharField(max_length=200)
    value = models.TextField(blank=True)

    class Meta:
        ordering = ["key"]
        constraints = [
            models.UniqueConstraint(fields=["universe", "key"], name="universe_meta_unique_key")
        ]
        verbose_name = "universe meta"
        verbose_name_plural = "universe meta"

    def __str__(self) -> str:
        return f"{self.universe}: {self.key}"


class LoreKind(models.TextChoices):
    CHARACTER = "character", "Character"
    PLACE = "place", "Place"
    FACTION = "faction", "Faction"
    ITEM = "item", "Item"
    CONCEPT = "concept", "Concept"
    EVENT = "event", "Event"


class EmbeddingState(models.TextChoices):
    PENDING = "pending", "Pending"
    EMBEDDED = "embedded", "Embedded"
    FAILED = "failed", "Failed"


class LoreEntry(models.Model):
    """One Lore Book entry. `entry_id` is stable across edits, exports and imports."""

    universe = models.ForeignKey(Universe, on_delete=models.CASCADE, related_name="lore_entries")
    entry_id = models.SlugField(max_length=120)
    title = models.CharField(max_length=300)
    kind = models.CharField(max_length=20, choices=LoreKind.choices, default=LoreKind.CONCEPT)
    text = models.TextField(blank=True)
    keys = models.JSONField(default=list, blank=True, help_text="Aliases and trigger keys.")
    links = models.ManyToManyField(
        "self", symmetrical=False, blank=True, related_name="backlinks"
    )
    extensions = models.JSONField(
        default=dict, blank=True, help_text="Imported fields the studio does not use, kept for re-export."
    )
    embedding_state = models.CharField(
        max_length=10, choices=EmbeddingState.choices, default=EmbeddingState.PENDING
    )
    embedding_error = models.TextField(blank=True)
    word_count = models.PositiveIntegerField(
        null=True, blank=True, editable=False, help_text="Words in the text; set by the lore services."
    )
    token_count = models.PositiveIntegerField(
        null=True, blank=True, editable=False,
        help_text="Embedding-model tokens in the text; set by the lore services.",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["title"]
        constraints = [
            models.UniqueConstraint(fields=["universe", "entry_id"], name="lore_entry_unique_id")
        ]
        indexes = [models.Index(fields=["universe", "kind"]), models.Index(fields=["universe", "title"])]
        verbose_name_plural = "lore entries"

    def __str__(self) -> str:
        return self.title

    def get_absolute_url(self) -> str:
        return reverse(
            "universes:lore_detail", kwargs={"slug": self.universe.slug, "entry_id": self.entry_id}
        )


class LoreRevision(models.Model):
    """One edit of a lore entry: who, when, and the entry before and after."""

    class Action(models.TextChoices):
        CREATE = "create", "Created"
        UPDATE = "update", "Updated"
        DELETE = "delete", "Deleted"
        RESTORE = "restore", "Restored"
        IMPORT = "import", "Imported"

    universe = models.ForeignKey(Universe, on_delete=models.CASCADE, related_name="lore_revisions")
    lore_entry = models.ForeignKey(
        LoreEntry, null=True, blank=True, on_delete=models.SET_NULL, related_name="revisions"
    )
    entry_id = models.SlugField(max_length=120, help_text="Kept when the entry is deleted.")
    action = models.CharField(max_length=10, choices=Action.choices)
    before = models.JSONField(null=True, blank=True)
    after = models.JSONField(null=True, blank=True)
    author = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["universe", "entry_id", "-created_at"])]

    def __str__(self) -> str:
        return f"{self.entry_id} {self.action} @ {self.created_at:%Y-%m-%d %H:%M}"

"""Universes: the world definition authors edit (Universe_Meta and the Lore Book).

The rows themselves (Universe, UniverseMeta, LoreEntry and its enums) are the world app's
(`studio.world.models`, below the engine; referred to here by label, so this module does not
re-export them); the authoring records around them stay here.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models


class LoreRevision(models.Model):
    """One edit of a lore entry: who, when, and the entry before and after."""

    class Action(models.TextChoices):
        CREATE = "create", "Created"
        UPDATE = "update", "Updated"
        DELETE = "delete", "Deleted"
        RESTORE = "restore", "Restored"
        IMPORT = "import", "Imported"

    universe = models.ForeignKey("world.Universe", on_delete=models.CASCADE, related_name="lore_revisions")
    lore_entry = models.ForeignKey(
        "world.LoreEntry", null=True, blank=True, on_delete=models.SET_NULL, related_name="revisions"
    )
    entry_id = models.SlugField(max_length=120, help_text="Kept when the entry is deleted.")
    action = models.CharField(max_length=10, choices=Action.choices)
    before = models.JSONField(null=True, blank=True)
    after = models.JSONField(null=True, blank=True)
    author = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["universe", "entry_id", "-created_at"])]

    def __str__(self) -> str:
        return f"{self.entry_id} {self.action} @ {self.created_at:%Y-%m-%d %H:%M}"


class PendingLoreLink(models.Model):
    """A link an author wrote to an entry not written yet: kept by name, resolved when it appears.

    `name` is what the author typed (a title or an entry id); `name_key` its casefold, the
    form lookups use. The lore services turn it into a real link, and delete it, when an
    entry of that title or id is created, renamed to it, imported or restored.
    """

    universe = models.ForeignKey("world.Universe", on_delete=models.CASCADE, related_name="pending_lore_links")
    source = models.ForeignKey("world.LoreEntry", on_delete=models.CASCADE, related_name="pending_links")
    name = models.CharField(max_length=300)
    name_key = models.CharField(max_length=300)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name_key", "id"]
        constraints = [models.UniqueConstraint(fields=["source", "name_key"], name="pending_lore_link_unique")]
        indexes = [models.Index(fields=["universe", "name_key"])]

    def __str__(self) -> str:
        return f"{self.source.entry_id} -> {self.name} (pending)"


# A universe's memory tests live in their own package; imported here so Django registers them.
from studio.universes.memory_tests.models import MemoryTest  # noqa: E402,F401

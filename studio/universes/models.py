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

    def meta_values(self) -> dict[str, str]:
        """Return every Universe_Meta row as {key: value} (one query): read it once per request or job
        and hand it on (`universe_meta=` parameters), as the narrator, the proxy and the viewers do."""
        return dict(self.meta.values_list("key", "value"))

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


class SelectiveLogic(models.IntegerChoices):
    """How secondary keys combine with a primary match (SillyTavern's `world_info_logic` numbers)."""

    AND_ANY = 0, "AND ANY (one secondary key also appears)"
    NOT_ALL = 1, "NOT ALL (at least one secondary key is missing)"
    NOT_ANY = 2, "NOT ANY (no secondary key appears)"
    AND_ALL = 3, "AND ALL (every secondary key also appears)"


class LorePosition(models.IntegerChoices):
    """Where an activated entry goes in the prompt (SillyTavern's `world_info_position` numbers)."""

    BEFORE_CHAR = 0, "Before the character / world definitions"
    AFTER_CHAR = 1, "After the character / world definitions"
    AN_TOP = 2, "Top of the author's note"
    AN_BOTTOM = 3, "Bottom of the author's note"
    AT_DEPTH = 4, "In the history, at a depth"
    EM_TOP = 5, "Before the example messages"
    EM_BOTTOM = 6, "After the example messages"
    OUTLET = 7, "Outlet (placed by name)"


class LoreRole(models.IntegerChoices):
    SYSTEM = 0, "System"
    USER = 1, "User"
    ASSISTANT = 2, "Assistant"


class ForcedActivation(models.TextChoices):
    """CCv3 `@@activate` / `@@dont_activate`: decide activation regardless of keys."""

    NONE = "", "Keys decide"
    ACTIVATE = "activate", "Always activate (@@activate)"
    DONT_ACTIVATE = "dont_activate", "Never activate (@@dont_activate)"


class AfterFirstMatch(models.TextChoices):
    """CCv3 `@@keep_activate_after_match` / `@@dont_activate_after_match`."""

    NONE = "", "No change"
    KEEP = "keep", "Stay active for good (@@keep_activate_after_match)"
    STOP = "stop", "Never again (@@dont_activate_after_match)"


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
    # Who knows this entry (studio.memory.knowledge): None = everyone; a list of characters,
    # factions or other entries (their linked characters); [] = nobody but the narrator (a secret).
    known_by = models.JSONField(null=True, blank=True, default=None)
    links = models.ManyToManyField(
        "self", symmetrical=False, blank=True, related_name="backlinks"
    )
    extensions = models.JSONField(
        default=dict, blank=True, help_text="Imported fields the studio does not use, kept for re-export."
    )
    # --- Activation (World Info semantics; see docs/authoring.md "Lore activation") ---------
    # First-class columns rather than one JSON bag: each is validated by the database
    # (constraints below), filterable (the health page, the engine's pre-filter), shown
    # field by field in revisions and diffs, and changed by bulk_update in the bulk editor.
    enabled = models.BooleanField(default=True)
    constant = models.BooleanField(default=False, help_text="Always active while enabled.")
    secondary_keys = models.JSONField(default=list, blank=True)
    selective = models.BooleanField(default=True, help_text="Apply the secondary keys.")
    selective_logic = models.PositiveSmallIntegerField(
        choices=SelectiveLogic.choices, default=SelectiveLogic.AND_ANY
    )
    case_sensitive = models.BooleanField(null=True, blank=True, help_text="Empty: the universe default.")
    match_whole_words = models.BooleanField(null=True, blank=True, help_text="Empty: the universe default.")
    scan_depth = models.PositiveSmallIntegerField(
        null=True, blank=True, help_text="Messages scanned; empty: the universe default."
    )
    insertion_order = models.IntegerField(default=100)
    priority = models.IntegerField(null=True, blank=True, help_text="Budget priority; empty: the insertion order.")
    position = models.PositiveSmallIntegerField(choices=LorePosition.choices, default=LorePosition.BEFORE_CHAR)
    depth = models.PositiveSmallIntegerField(default=4)
    role = models.PositiveSmallIntegerField(choices=LoreRole.choices, null=True, blank=True)
    probability = models.PositiveSmallIntegerField(default=100)
    use_probability = models.BooleanField(default=True)
    inclusion_group = models.CharField(max_length=300, blank=True, help_text="Comma-separated group names.")
    group_prioritize = models.BooleanField(default=False)
    group_weight = models.PositiveIntegerField(default=100)
    group_scoring = models.BooleanField(null=True, blank=True, help_text="Empty: the universe default.")
    sticky = models.PositiveIntegerField(default=0)
    cooldown = models.PositiveIntegerField(default=0)
    delay = models.PositiveIntegerField(default=0)
    exclude_recursion = models.BooleanField(default=False)
    prevent_recursion = models.BooleanField(default=False)
    delay_until_recursion = models.PositiveSmallIntegerField(default=0, help_text="0 = off; N = recursion level N.")
    ignore_budget = models.BooleanField(default=False)
    vectorized = models.BooleanField(default=True, help_text="Also found by meaning.")
    forced = models.CharField(max_length=16, choices=ForcedActivation.choices, default="", blank=True)
    activate_only_after = models.PositiveIntegerField(default=0)
    activate_only_every = models.PositiveIntegerField(default=0)
    after_first_match = models.CharField(max_length=8, choices=AfterFirstMatch.choices, default="", blank=True)
    additional_keys = models.JSONField(default=list, blank=True, help_text="Groups of keys; one of each group must appear.")
    exclude_keys = models.JSONField(default=list, blank=True)
    ignore_on_max_context = models.BooleanField(default=False)
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
    # Raised by one on every write (under a row lock, in the lore services); an edit carries
    # the version it was based on, so saving over a newer version is a conflict, not a loss.
    version = models.PositiveIntegerField(default=1, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["title"]
        constraints = [
            models.UniqueConstraint(fields=["universe", "entry_id"], name="lore_entry_unique_id"),
            models.CheckConstraint(condition=models.Q(probability__lte=100), name="lore_entry_probability_range"),
            models.CheckConstraint(condition=models.Q(selective_logic__lte=3), name="lore_entry_selective_logic_range"),
            models.CheckConstraint(condition=models.Q(position__lte=7), name="lore_entry_position_range"),
            models.CheckConstraint(
                condition=models.Q(scan_depth__isnull=True) | models.Q(scan_depth__lte=1000),
                name="lore_entry_scan_depth_range",
            ),
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


class PendingLoreLink(models.Model):
    """A link an author wrote to an entry not written yet: kept by name, resolved when it appears.

    `name` is what the author typed (a title or an entry id); `name_key` its casefold, the
    form lookups use. The lore services turn it into a real link, and delete it, when an
    entry of that title or id is created, renamed to it, imported or restored.
    """

    universe = models.ForeignKey(Universe, on_delete=models.CASCADE, related_name="pending_lore_links")
    source = models.ForeignKey(LoreEntry, on_delete=models.CASCADE, related_name="pending_links")
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

"""The world's rows: a universe and its Lore Book, a save and its turns (issue 34).

The bottom app: every other app (the engine included) stores against these rows, so they sit
below all of them and import none of them. Rows and their invariants only: the services that
write them stay with their apps (`universes/services.py`, `saves/services.py`, the engine's
`memory/lore/embedding_state.py`, ...).

The models came from `studio.universes` (Universe, UniverseMeta, LoreEntry) and `studio.saves`
(Save, Event, StateCache) and kept their tables (`Meta.db_table`, and the many-to-many tables'
`db_table`): the move changed Django's state, not the schema (docs/architecture.md, "Upgrading
to the world app").
"""

from __future__ import annotations

import contextlib
import contextvars
import uuid

from django.conf import settings
from django.db import models
from django.db.models.functions import MD5
from django.urls import reverse


# --- The Lore Book (tables `universes_*`) -------------------------------------------------------


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
        settings.AUTH_USER_MODEL, blank=True, related_name="member_universes", db_table="universes_universe_members"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        db_table = "universes_universe"
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def get_absolute_url(self) -> str:
        return reverse("universes:detail", kwargs={"slug": self.slug})

    def meta_values(self) -> dict[str, str]:
        """Return every Universe_Meta row as {key: value} (one query): read it once per request or job
        and hand it on (`universe_meta=` parameters), as the narrator, the proxy and the viewers do.

        Inside `meta_read_once()` the rows are read once per universe and the copies handed out.
        """
        memo = _meta_memo.get()
        if memo is None:
            return dict(self.meta.values_list("key", "value"))
        values = memo.get(self.pk)
        if values is None:
            values = memo[self.pk] = dict(self.meta.values_list("key", "value"))
        return dict(values)

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
        db_table = "universes_universemeta"
        ordering = ["key"]
        constraints = [models.UniqueConstraint(fields=["universe", "key"], name="universe_meta_unique_key")]
        verbose_name = "universe meta"
        verbose_name_plural = "universe meta"

    def __str__(self) -> str:
        return f"{self.universe}: {self.key}"


# The meta read in a `meta_read_once()` block, by universe pk (None: outside any block, every call reads).
_meta_memo: contextvars.ContextVar[dict[int, dict[str, str]] | None] = contextvars.ContextVar(
    "universe_meta_memo", default=None
)


@contextlib.contextmanager
def meta_read_once():
    """Within the block, `Universe.meta_values()` reads each universe's meta once (a memory proxy request reads it
    in the lore activation, the guard, the macros, the chapters and the context: seven queries, one needed).
    A meta row saved or deleted in the block clears what was read; a bulk `update()` of meta rows inside a
    block is not seen (none is made where a block is open)."""
    token = _meta_memo.set({})
    try:
        yield
    finally:
        _meta_memo.reset(token)


def _forget_meta(sender, **kwargs) -> None:
    memo = _meta_memo.get()
    if memo:
        memo.clear()


models.signals.post_save.connect(_forget_meta, sender=UniverseMeta, dispatch_uid="world_meta_read_once_save")
models.signals.post_delete.connect(_forget_meta, sender=UniverseMeta, dispatch_uid="world_meta_read_once_delete")


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
        "self", symmetrical=False, blank=True, related_name="backlinks", db_table="universes_loreentry_links"
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
    selective_logic = models.PositiveSmallIntegerField(choices=SelectiveLogic.choices, default=SelectiveLogic.AND_ANY)
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
    additional_keys = models.JSONField(
        default=list, blank=True, help_text="Groups of keys; one of each group must appear."
    )
    exclude_keys = models.JSONField(default=list, blank=True)
    ignore_on_max_context = models.BooleanField(default=False)
    embedding_state = models.CharField(max_length=10, choices=EmbeddingState.choices, default=EmbeddingState.PENDING)
    embedding_error = models.TextField(blank=True)
    word_count = models.PositiveIntegerField(
        null=True, blank=True, editable=False, help_text="Words in the text; set by the lore services."
    )
    token_count = models.PositiveIntegerField(
        null=True,
        blank=True,
        editable=False,
        help_text="Embedding-model tokens in the text; set by the lore services.",
    )
    # Raised by one on every write (under a row lock, in the lore services); an edit carries
    # the version it was based on, so saving over a newer version is a conflict, not a loss.
    version = models.PositiveIntegerField(default=1, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        db_table = "universes_loreentry"
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
        return reverse("universes:lore_detail", kwargs={"slug": self.universe.slug, "entry_id": self.entry_id})


# --- Playthroughs (tables `saves_*`) ------------------------------------------------------------


def new_save_id() -> str:
    return uuid.uuid4().hex[:16]


class MemoryMode(models.TextChoices):
    CLASSIC = "classic", "Classic (hybrid search only)"
    LIVING = "living", "Living (facts, beliefs, mental models)"


class Save(models.Model):
    universe = models.ForeignKey(Universe, on_delete=models.CASCADE, related_name="saves")
    save_id = models.CharField(max_length=64, unique=True, default=new_save_id)
    name = models.CharField(max_length=200)
    memory_mode = models.CharField(max_length=10, choices=MemoryMode.choices, default=MemoryMode.CLASSIC)
    beliefs_enabled = models.BooleanField(default=True)
    current_turn = models.PositiveIntegerField(default=0)
    timeline_generation = models.PositiveIntegerField(
        default=0, help_text="Incremented by every rewind; jobs from an older generation write nothing."
    )
    meta = models.JSONField(default=dict, blank=True, help_text="Universe_Meta copied at creation.")
    forked_from = models.ForeignKey("self", null=True, blank=True, on_delete=models.SET_NULL, related_name="forks")
    fork_turn = models.PositiveIntegerField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    last_activity_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        db_table = "saves_save"
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
        null=True,
        blank=True,
        help_text="When the narrative was last edited by hand (before accepting, or afterwards); none: as narrated or written.",
    )

    class Meta:
        db_table = "saves_event"
        ordering = ["game_save", "turn_id"]
        constraints = [models.UniqueConstraint(fields=["game_save", "turn_id"], name="event_unique_turn")]
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
        db_table = "saves_statecache"
        ordering = ["game_save", "turn_id"]
        constraints = [models.UniqueConstraint(fields=["game_save", "turn_id"], name="state_unique_turn")]
        verbose_name = "state cache"
        verbose_name_plural = "state cache"

    def __str__(self) -> str:
        return f"{self.game_save.save_id} state @ {self.turn_id}"

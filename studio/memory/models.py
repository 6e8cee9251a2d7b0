"""Living-memory tables (facts, beliefs, mental models) and the bookkeeping around them.

Field names follow the engine API (`axiom.facts.Fact`, `axiom.observations.Observation`,
`axiom.mental_models.MentalModel`); every row is keyed by save + turn ids so a rewind is a
set of deletes and updates in one transaction. The engine's dataclasses of the same names
live in `facts.py`, `observations.py` and `mental_models.py` and convert to and from these.
"""

from __future__ import annotations

from django.db import models

ENTITY_SEPARATOR = "\x1f"


def entity_index_for(entities: list[str]) -> str:
    """Return the searchable form of an entities list: casefolded names between separators.

    `get_facts(entity=...)` needs a case-insensitive exact match on a JSON list, which no
    portable SQL offers; a `contains` on this column does it on SQLite and PostgreSQL alike.
    """
    names = [str(e).strip().casefold() for e in entities or [] if str(e).strip()]
    if not names:
        return ""
    return ENTITY_SEPARATOR + ENTITY_SEPARATOR.join(names) + ENTITY_SEPARATOR


def subject_key_for(subject: str) -> str:
    return (subject or "").strip().casefold()


class Fact(models.Model):
    game_save = models.ForeignKey("world.Save", on_delete=models.CASCADE, related_name="facts")
    turn_id = models.PositiveIntegerField()
    statement = models.TextField()
    fact_type = models.CharField(max_length=40, default="world")
    who = models.TextField(blank=True)
    what = models.TextField(blank=True)
    when = models.TextField(blank=True)
    where = models.TextField(blank=True)
    why = models.TextField(blank=True)
    entities = models.JSONField(default=list, blank=True)
    entity_index = models.TextField(blank=True, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-turn_id", "-id"]
        indexes = [
            models.Index(fields=["game_save", "turn_id"]),
            models.Index(fields=["game_save", "fact_type"]),
        ]

    def __str__(self) -> str:
        return self.statement[:80]

    def save(self, *args, **kwargs):
        self.entity_index = entity_index_for(self.entities)
        super().save(*args, **kwargs)


class LiveObservationManager(models.Manager):
    """Beliefs that are held now: a DELETE keeps the row as a tombstone so a rewind can undo it."""

    def get_queryset(self):
        return super().get_queryset().filter(deleted_turn_id__isnull=True)


class Observation(models.Model):
    """A consolidated belief; `sources` is a list of {"fact_id", "turn_id"} (the rollback key)."""

    game_save = models.ForeignKey("world.Save", on_delete=models.CASCADE, related_name="observations")
    statement = models.TextField()
    subject = models.CharField(max_length=200, blank=True)
    subject_key = models.CharField(max_length=200, blank=True, editable=False)
    # Who holds the belief (studio.memory.knowledge): "" = the world's belief (every fact), a
    # character's name = formed under that character's mission from the facts they know.
    # `subject` stays what the belief is about; rows from before this column are the world's.
    holder = models.CharField(max_length=200, blank=True, default="")
    proof_count = models.PositiveIntegerField(default=0)
    sources = models.JSONField(default=list, blank=True)
    history = models.JSONField(default=list, blank=True)
    created_turn_id = models.PositiveIntegerField(default=0)
    updated_turn_id = models.PositiveIntegerField(default=0)
    last_source_turn = models.PositiveIntegerField(
        default=0, editable=False, help_text="Highest turn among the sources (finds rewind work in SQL)."
    )
    stale = models.BooleanField(default=False)
    deleted_turn_id = models.PositiveIntegerField(
        null=True,
        blank=True,
        help_text="Set when a consolidation DELETE retired the belief; a rewind before it restores it.",
    )

    objects = LiveObservationManager()
    all_objects = models.Manager()

    class Meta:
        ordering = ["-updated_turn_id", "-id"]
        base_manager_name = "all_objects"
        indexes = [
            models.Index(fields=["game_save", "subject_key"]),
            models.Index(fields=["game_save", "created_turn_id"]),
            models.Index(fields=["game_save", "updated_turn_id"]),
            models.Index(fields=["game_save", "last_source_turn"]),
        ]
        verbose_name = "belief (observation)"
        verbose_name_plural = "beliefs (observations)"

    def __str__(self) -> str:
        return self.statement[:80]

    def save(self, *args, **kwargs):
        self.subject_key = subject_key_for(self.subject)
        self.proof_count = len(self.sources or [])
        self.last_source_turn = max((int(s.get("turn_id") or 0) for s in self.sources or []), default=0)
        super().save(*args, **kwargs)


class MentalModel(models.Model):
    """One curated profile per (save, subject); `versions` keeps each summary with its turn."""

    game_save = models.ForeignKey("world.Save", on_delete=models.CASCADE, related_name="mental_models")
    subject = models.CharField(max_length=200, blank=True)
    subject_key = models.CharField(max_length=200, blank=True, editable=False)
    summary = models.TextField()
    sources = models.JSONField(default=list, blank=True)
    versions = models.JSONField(default=list, blank=True)
    created_turn_id = models.PositiveIntegerField(default=0)
    updated_turn_id = models.PositiveIntegerField(default=0)
    stale = models.BooleanField(default=False)

    class Meta:
        ordering = ["-updated_turn_id", "-id"]
        constraints = [
            models.UniqueConstraint(fields=["game_save", "subject_key"], name="mental_model_one_per_subject")
        ]
        indexes = [
            models.Index(fields=["game_save", "created_turn_id"]),
            models.Index(fields=["game_save", "stale", "updated_turn_id"]),
        ]

    def __str__(self) -> str:
        return f"{self.subject or '(world)'}: {self.summary[:60]}"

    def save(self, *args, **kwargs):
        self.subject_key = subject_key_for(self.subject)
        super().save(*args, **kwargs)


class VectorCorpusVersion(models.Model):
    """A per-scope counter bumped on every change to the vector chunks of that scope.

    A scope is a VectorMemory `save_id` (a save, or a universe's own Lore Book). Each
    process caches its BM25 index per scope and rebuilds it only when this number moved, so
    a change made by a worker process invalidates the web process's cache too.
    """

    scope_id = models.CharField(max_length=120, unique=True)
    version = models.PositiveBigIntegerField(default=0)
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"{self.scope_id} v{self.version}"


class VectorCorpusChange(models.Model):
    """What one version of a scope's chunks changed: the chunk ids its write added and removed.

    Written with the VectorCorpusVersion bump, in its transaction (studio/memory/corpus_log.py),
    so a process whose cache holds an older version fetches only what changed since.
    """

    scope_id = models.CharField(max_length=120)
    version = models.PositiveBigIntegerField()
    added = models.JSONField(default=list, blank=True)
    removed = models.JSONField(default=list, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["scope_id", "version"], name="vector_corpus_change_unique_version")
        ]

    def __str__(self) -> str:
        return f"{self.scope_id} v{self.version}: +{len(self.added)} -{len(self.removed)}"


class JobKind(models.TextChoices):
    SYNC_LORE = "sync_lore", "Sync lore embeddings"
    EMBED_TURN = "embed_turn", "Embed turn"
    LIVING_TURN = "living_turn", "Living memory (extract, consolidate, reflect)"
    REFRESH_MODELS = "refresh_models", "Refresh stale mental models"
    VECTOR_ROLLBACK = "vector_rollback", "Delete rewound vector chunks"
    FORK_VECTORS = "fork_vectors", "Copy vector chunks to a fork"
    SUMMARIZE_CHAPTER = "summarize_chapter", "Summarize a chapter or arc"


class JobStatus(models.TextChoices):
    QUEUED = "queued", "Queued"
    RUNNING = "running", "Running"
    DONE = "done", "Done"
    FAILED = "failed", "Failed"
    SKIPPED = "skipped", "Skipped"
    PAUSED = "paused", "Paused"


class Job(models.Model):
    kind = models.CharField(max_length=20, choices=JobKind.choices)
    universe = models.ForeignKey("world.Universe", null=True, blank=True, on_delete=models.CASCADE, related_name="jobs")
    game_save = models.ForeignKey("world.Save", null=True, blank=True, on_delete=models.CASCADE, related_name="jobs")
    turn_id = models.PositiveIntegerField(null=True, blank=True)
    timeline_generation = models.PositiveIntegerField(default=0)
    status = models.CharField(max_length=10, choices=JobStatus.choices, default=JobStatus.QUEUED)
    progress = models.CharField(max_length=200, blank=True)
    progress_at = models.DateTimeField(null=True, blank=True, help_text="When the step in `progress` began.")
    error = models.TextField(blank=True)
    attempts = models.PositiveIntegerField(default=0)
    payload = models.JSONField(default=dict, blank=True)
    result = models.JSONField(default=dict, blank=True)
    llm_calls = models.PositiveIntegerField(default=0)
    llm_tokens = models.PositiveIntegerField(default=0)
    task_id = models.CharField(max_length=64, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [
            models.Index(fields=["game_save", "status"]),
            models.Index(fields=["game_save", "turn_id"]),
            models.Index(fields=["universe", "status"]),
            models.Index(fields=["status", "created_at"]),
        ]

    def __str__(self) -> str:
        return f"{self.get_kind_display()} #{self.pk} ({self.status})"

    @property
    def duration_seconds(self) -> float | None:
        if self.started_at and self.finished_at:
            return (self.finished_at - self.started_at).total_seconds()
        return None

    @property
    def running_seconds(self) -> float | None:
        """How long a running job has run so far (None unless running)."""
        from django.utils import timezone

        if self.status != "running" or not self.started_at:
            return None
        return max(0.0, (timezone.now() - self.started_at).total_seconds())

    @property
    def step_seconds(self) -> float | None:
        """How long a running job has been at its current step (`progress`), None unless running."""
        from django.utils import timezone

        if self.status != "running":
            return None
        since = max(filter(None, (self.progress_at, self.started_at)), default=None)
        return max(0.0, (timezone.now() - since).total_seconds()) if since else None


class LLMCall(models.Model):
    """One call to the LLM endpoint, for the spend guard and for admins."""

    game_save = models.ForeignKey(
        "world.Save", null=True, blank=True, on_delete=models.SET_NULL, related_name="llm_calls"
    )
    job = models.ForeignKey(Job, null=True, blank=True, on_delete=models.SET_NULL, related_name="llm_call_log")
    operation = models.CharField(max_length=20)
    model = models.CharField(max_length=200, blank=True)
    prompt_tokens = models.PositiveIntegerField(default=0)
    completion_tokens = models.PositiveIntegerField(default=0)
    latency_ms = models.PositiveIntegerField(default=0)
    error = models.TextField(blank=True)
    user = models.ForeignKey(
        "auth.User",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="llm_calls",
        help_text="Whose request it was (the memory proxy's key holder): the per-user daily spend guard counts it.",
    )
    refused = models.BooleanField(
        default=False, help_text="Refused by a spend guard before reaching the model (not counted as spent)."
    )
    request = models.TextField(blank=True, help_text="The messages sent (system, then user), for playtesters.")
    answer = models.TextField(blank=True, help_text="The model's text (what arrived of it, for a broken stream).")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["game_save", "created_at"]), models.Index(fields=["user", "created_at"])]
        verbose_name = "LLM call"

    def __str__(self) -> str:
        return f"{self.operation} {self.model} ({self.prompt_tokens}+{self.completion_tokens} tokens)"

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


class RecordedQuery(models.Model):
    """A memory query made during play, kept so a lore edit can be replayed against it."""

    game_save = models.ForeignKey("world.Save", on_delete=models.CASCADE, related_name="recorded_queries")
    turn_id = models.PositiveIntegerField()
    query_text = models.TextField()
    params = models.JSONField(default=dict, blank=True)
    result_ids = models.JSONField(default=list, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-turn_id", "-id"]
        indexes = [models.Index(fields=["game_save", "turn_id"])]
        verbose_name_plural = "recorded queries"  # not Django's "recorded querys"

    def __str__(self) -> str:
        return f"{self.game_save_id}@{self.turn_id}: {self.query_text[:40]}"


class LoreActivation(models.Model):
    """What lore activation decided at one turn of a save, and the state it left.

    One row per (save, turn): `state` is the LoreState after the turn (sticky and cooldown
    windows, first matches; studio.memory.lore_activation), `activated` the entry ids in
    prompt order, `sequence` the order they activated in, `seed` the seed of every draw.
    A rewind to N deletes the rows after N; a fork copies the rows up to N; the state as of
    N is the row with the highest turn <= N (studio/memory/lore/activation_state.py).
    """

    game_save = models.ForeignKey("world.Save", on_delete=models.CASCADE, related_name="lore_activations")
    turn_id = models.PositiveIntegerField()
    state = models.JSONField(default=dict, blank=True)
    activated = models.JSONField(default=list, blank=True)
    sequence = models.JSONField(default=list, blank=True)
    seed = models.CharField(max_length=200, blank=True)
    book_version = models.CharField(max_length=200, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["game_save", "turn_id"]
        constraints = [models.UniqueConstraint(fields=["game_save", "turn_id"], name="lore_activation_unique_turn")]

    def __str__(self) -> str:
        return f"{self.game_save_id} lore @ {self.turn_id}: {len(self.activated)} active"


# Chapters and arcs (long play) live in their own package; imported here so Django registers them.
from studio.memory.chapters.models import Chapter  # noqa: E402,F401

# Who knows what (presence per turn, reveal events): tables of this app, defined in their package.
from studio.memory.knowledge.models import Presence, PresenceSource, Reveal, RevealSource  # noqa: E402,F401

# Continuity findings (the guard at accept): rows of their turn, defined in their package.
from studio.memory.continuity.models import ContinuityFinding, FindingKind, FindingResolution, FindingVerdict  # noqa: E402,F401

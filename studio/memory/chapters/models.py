"""The Chapter row: a closed run of a save's turns, or an arc of closed chapters, with its summary.

Only *closed* chapters have rows. The open chapter is implicit: the turns after the last
closed chapter's `last_turn` (`studio.memory.chapters.selectors.open_chapter_start`). An arc
is a row of `level` 1 covering the turns of `chapters_per_arc` consecutive chapters; an arc
of arcs is level 2, and so on, as deep as the story needs.

A chapter is per-turn-range data of the timeline registry (`studio.memory.chapters.timeline`):
a rewind to N deletes every row (any level) closed after N (`closed_turn`: a chapter that a
scene change at turn N+1 closed ends at N but was closed by N+1), which re-opens the chapter
holding N and drops the summaries recorded after N; a fork copies the rows closed at or
before N; the save file carries them (`chapters` section).

The summary: `summary_status` says where it stands (pending while its job runs, done with
the model's text, `no_model` when no LLM is configured, failed with `summary_error`). A
playtester's edit is an override: `edited` is set, the text is theirs, and no job writes
over it (`generated_summary` keeps the model's text beside it when there was one).
"""

from __future__ import annotations

from django.db import models


class ChapterCloseReason(models.TextChoices):
    PLAYTESTER = "playtester", "Closed by the playtester"
    SCENE = "scene", "Scene change"
    LENGTH = "length", "Turn limit"
    ROLLUP = "rollup", "Arc of chapters"
    IMPORT = "import", "Imported"


class SummaryStatus(models.TextChoices):
    PENDING = "pending", "Summary pending"
    DONE = "done", "Summarized"
    NO_MODEL = "no_model", "No summary made: no model configured"
    FAILED = "failed", "Summary failed"
    EMPTY = "empty", "Nothing to summarize"


class Chapter(models.Model):
    game_save = models.ForeignKey("world.Save", on_delete=models.CASCADE, related_name="chapters")
    level = models.PositiveSmallIntegerField(
        default=0, help_text="0: a chapter; 1: an arc of chapters; 2: an arc of arcs ..."
    )
    first_turn = models.PositiveIntegerField()
    last_turn = models.PositiveIntegerField()
    # The turn whose append (or the current turn of a playtester's close) closed it: a scene
    # change closes turns ..N when turn N+1 arrives, so a rewind to N re-opens that chapter.
    closed_turn = models.PositiveIntegerField()
    close_reason = models.CharField(max_length=12, choices=ChapterCloseReason.choices)
    close_note = models.CharField(max_length=300, blank=True)
    story_time_start = models.CharField(max_length=120, blank=True)
    story_time_end = models.CharField(max_length=120, blank=True)
    summary = models.TextField(blank=True)
    summary_status = models.CharField(max_length=10, choices=SummaryStatus.choices, default=SummaryStatus.PENDING)
    summary_error = models.TextField(blank=True)
    summary_model = models.CharField(max_length=200, blank=True)
    edited = models.BooleanField(default=False)
    generated_summary = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        app_label = "memory"
        ordering = ["game_save", "level", "first_turn"]
        constraints = [
            models.UniqueConstraint(fields=["game_save", "level", "first_turn"], name="chapter_unique_start"),
        ]
        # The open chapter's start and an arc's roll-up read the newest row of a level: an index
        # walk, not a scan of a long save's thousands of chapters (issue 33).
        indexes = [models.Index(fields=["game_save", "level", "last_turn"], name="chapter_level_last_turn")]

    def __str__(self) -> str:
        return f"{self.game_save_id} {self.kind_label} turns {self.first_turn}-{self.last_turn}"

    @property
    def kind_label(self) -> str:
        return "chapter" if self.level == 0 else ("arc" if self.level == 1 else f"arc (level {self.level})")

    @property
    def has_summary(self) -> bool:
        return bool(self.summary.strip()) and (self.edited or self.summary_status == SummaryStatus.DONE)

    @property
    def story_time(self) -> str:
        """The story time it covers ("" without one): "start – end", or one value."""
        start, end = self.story_time_start.strip(), self.story_time_end.strip()
        if start and end and start != end:
            return f"{start} – {end}"
        return start or end

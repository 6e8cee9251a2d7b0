"""The results of a save's memory tests, one row per test and turn: what a run found, and why.

Imported by `studio.saves.models`, so the table belongs to the `saves` app. A run judges the
universe's tests on the save as it stands at its current turn and records one row per test at
that turn (a second run at the same turn replaces the first). Each row keeps the test as it ran
(`definition`, the flat record), so an edited or deleted test leaves the results as they were.
The table is in the timeline registry (`saves/memory_tests/timeline_tables.py`): a rewind to N
deletes the rows after N, so the results shown are those that stood at N; a fork copies the rows
up to N; the save file carries them (section `memory_test_results`).
"""

from __future__ import annotations

from django.db import models


class Verdict(models.TextChoices):
    PASS = "pass", "Passed"
    FAIL = "fail", "Failed"
    ERROR = "error", "Could not be judged"  # counts as a failure: a missing entry, an unusable action
    SKIPPED = "skipped", "Not judged at this turn"  # the save stands outside the test's turns


FAILING = (Verdict.FAIL, Verdict.ERROR)


class MemoryTestResult(models.Model):
    game_save = models.ForeignKey("world.Save", on_delete=models.CASCADE, related_name="memory_test_results")
    turn_id = models.PositiveIntegerField(help_text="The turn the save stood at when the test ran.")
    name = models.SlugField(max_length=80)
    kind = models.CharField(max_length=20)
    definition = models.JSONField(default=dict, help_text="The test as it ran (the flat record).")
    verdict = models.CharField(max_length=10, choices=Verdict.choices)
    summary = models.TextField(blank=True)
    explain = models.JSONField(default=list, blank=True, help_text="The explain records behind the verdict.")
    ran_at = models.DateTimeField()

    class Meta:
        ordering = ["turn_id", "name"]
        constraints = [
            models.UniqueConstraint(fields=["game_save", "turn_id", "name"], name="memory_test_result_once_per_turn")
        ]

    def __str__(self) -> str:
        return f"{self.game_save_id}@{self.turn_id} {self.name}: {self.verdict}"

    @property
    def failed(self) -> bool:
        return self.verdict in FAILING

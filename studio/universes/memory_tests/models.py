"""A universe's memory tests: the definitions an author writes, kept with the universe.

Imported by `studio.universes.models`, so the table belongs to the `universes` app. A row
holds one test in its checked form (`spec.parse_spec`): the common fields as columns, the
kind's fields as `params`. Its `turn` and `until_turn` say when the test applies; they are
not a position on a save's timeline (the results are: `studio.saves.memory_tests`), so the
model is exempt from the timeline registry (`UniversesConfig.ready()`).
"""

from __future__ import annotations

from django.db import models

from studio.universes.memory_tests.spec import KIND_LABELS, MemoryTestSpec


class MemoryTest(models.Model):
    universe = models.ForeignKey("world.Universe", on_delete=models.CASCADE, related_name="memory_tests")
    name = models.SlugField(max_length=80)
    kind = models.CharField(max_length=20, choices=list(KIND_LABELS.items()))
    turn = models.PositiveIntegerField(default=0, help_text="The test holds at or after this turn.")
    until_turn = models.PositiveIntegerField(
        null=True, blank=True, help_text="... and up to this turn (no_findings: the range's end)."
    )
    description = models.TextField(blank=True)
    params = models.JSONField(default=dict, blank=True, help_text="The kind's fields (spec.KIND_FIELDS).")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]
        constraints = [models.UniqueConstraint(fields=["universe", "name"], name="memory_test_unique_name")]

    def __str__(self) -> str:
        return f"{self.universe_id}: {self.name}"

    @property
    def spec(self) -> MemoryTestSpec:
        """The test as `spec.parse_spec` returned it when it was stored."""
        params = dict(self.params or {})
        if isinstance(params.get("pov"), list):
            params["pov"] = tuple(params["pov"])
        return MemoryTestSpec(
            name=self.name,
            kind=self.kind,
            turn=self.turn,
            until=self.until_turn,
            description=self.description,
            params=params,
        )

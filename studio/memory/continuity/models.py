"""Continuity findings: what the guard found in a proposed narration, as rows of its turn.

Imported by `studio.memory.models`, so the table belongs to the `memory` app. A finding is
made when a narration is proposed for turn N (the Console's draft, the memory proxy's answer)
and kept with turn N: a rewind to before N deletes it with the turn's other rows, a fork copies
the findings up to its turn, a save file carries them (section `continuity_findings`).

Each row names the sentence, the memory item it conflicts with and that item's turn, and why.
`draft_id` and `alternative` say which proposal of the turn it was found in (informational:
a draft is not part of the timeline, so a fork or a save file keeps the numbers only);
`resolution` says what the playtester did about it (regenerated with it as an instruction,
accepted anyway, fixed by an edit), "" while the proposal is still open.
"""

from __future__ import annotations

from django.db import models


class FindingKind(models.TextChoices):
    LEAK = "leak", "Leak"
    PRESENCE = "presence", "Off scene"
    CONTRADICTION = "contradiction", "Contradiction"


class FindingVerdict(models.TextChoices):
    FOUND = "found", "Found (deterministic)"
    CANDIDATE = "candidate", "Possible (not judged)"
    CONFIRMED = "confirmed", "Confirmed by the model"
    REJECTED = "rejected", "Rejected by the model"


class FindingResolution(models.TextChoices):
    OPEN = "", "Open"
    REGENERATED = "regenerated", "Regenerated with it as an instruction"
    ACCEPTED = "accepted", "Accepted anyway"
    EDITED = "edited", "Fixed by an edit"
    SUPERSEDED = "superseded", "Another alternative was accepted"


class ContinuityFinding(models.Model):
    game_save = models.ForeignKey("world.Save", on_delete=models.CASCADE, related_name="continuity_findings")
    turn_id = models.PositiveIntegerField(help_text="The turn the narration was proposed for.")
    draft_id = models.PositiveIntegerField(null=True, blank=True, help_text="The narrator draft (informational).")
    alternative = models.PositiveIntegerField(default=1, help_text="The draft's alternative it was found in.")
    kind = models.CharField(max_length=16, choices=FindingKind.choices)
    verdict = models.CharField(max_length=12, choices=FindingVerdict.choices, default=FindingVerdict.FOUND)
    resolution = models.CharField(max_length=12, choices=FindingResolution.choices, default="", blank=True)
    regenerated_as = models.PositiveIntegerField(
        null=True, blank=True, help_text="The alternative regenerated with this finding as an instruction."
    )
    sentence = models.TextField()
    character = models.CharField(max_length=200, blank=True, help_text="Who says or does it ('' : the narration).")
    item_layer = models.CharField(max_length=16, help_text="lore, fact, belief, turn or presence.")
    item_ref = models.JSONField(default=dict, blank=True)
    item_text = models.TextField(blank=True)
    item_turn = models.PositiveIntegerField(null=True, blank=True, help_text="The turn of the memory item (0: canon).")
    why = models.TextField()
    judge = models.TextField(blank=True, help_text="The model's reason, when it judged the finding.")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["game_save", "turn_id", "id"]
        indexes = [models.Index(fields=["game_save", "turn_id"]), models.Index(fields=["game_save", "draft_id"])]

    def __str__(self) -> str:
        return f"turn {self.turn_id} {self.kind}: {self.why[:60]}"

    @property
    def item_label(self) -> str:
        """How the finding names its item ("lore secret-x", "fact 12", "turn 7")."""
        from studio.memory.continuity.findings import Item

        return Item(self.item_layer, self.item_ref or {}, self.item_text, self.item_turn).label()

    @property
    def counts(self) -> bool:
        """Whether the finding stands (found, confirmed or possible; not rejected by the model)."""
        return self.verdict != FindingVerdict.REJECTED

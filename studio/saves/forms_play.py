"""The Console's play-settings form: the save's author's note and sampler overrides."""
from __future__ import annotations

from django import forms

from studio.saves.models import PlaySettings
from studio.saves.narrator.authors_note import MAX_DEPTH, MAX_NOTE_CHARS
from studio.saves.narrator.sampler import FIELDS, HELP, LABELS, RANGES


class PlaySettingsForm(forms.ModelForm):
    """Empty sampler fields are not overridden: the universe's meta, then the environment apply."""

    class Meta:
        model = PlaySettings
        fields = ("authors_note", "authors_note_depth", *FIELDS)
        labels = {"authors_note": "Author's note", "authors_note_depth": "Depth", **LABELS}
        help_texts = {
            "authors_note": "Put into the narrator's prompt at every narration of this save, e.g. “Keep the "
            "rain falling; Mira hides the ledger.” Empty: no note.",
            "authors_note_depth": "Where it goes: 0 after the closing instruction (read last), 1 just before it, "
            "2 before the player's action, 3 before the recent turns, 4 at the top.",
            **{name: f"{HELP[name]} Empty: the universe's or the environment's value." for name in FIELDS},
        }
        widgets = {"authors_note": forms.Textarea(attrs={"rows": 3, "maxlength": MAX_NOTE_CHARS})}

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["authors_note"].max_length = MAX_NOTE_CHARS
        self.fields["authors_note_depth"].max_value = MAX_DEPTH
        self.fields["authors_note_depth"].widget.attrs.update({"min": 0, "max": MAX_DEPTH})
        for name in FIELDS:
            low, high = RANGES[name]
            field = self.fields[name]
            field.required = False
            field.widget.attrs.update({"min": low, "max": high, "step": "1" if name == "max_tokens" else "any"})

    def clean(self):
        cleaned = super().clean()
        for name in FIELDS:
            value = cleaned.get(name)
            low, high = RANGES[name]
            if value is not None and not low <= value <= high:
                self.add_error(name, f"Between {low} and {high}.")
        depth = cleaned.get("authors_note_depth")
        if depth is not None and depth > MAX_DEPTH:
            self.add_error("authors_note_depth", f"At most {MAX_DEPTH}.")
        return cleaned

"""The Console's play-settings form: the save's author's note and sampler overrides.

Each field is the declared limit's form field (`studio/limits.py`: its type, range and
length, the same check the API, the save file and `play_settings_update` apply).
"""

from __future__ import annotations

from django import forms

from studio import limits
from studio.saves.models import PlaySettings
from studio.saves.narrator.sampler import FIELDS, HELP, LABELS


class PlaySettingsForm(forms.ModelForm):
    """Empty sampler fields are not overridden: the universe's meta, then the environment apply."""

    authors_note = limits.form_field(
        "play.authors_note",
        required=False,
        label="Author's note",
        widget=forms.Textarea(attrs={"rows": 3}),
        help_text="Put into the narrator's prompt at every narration of this save, e.g. “Keep the rain falling; "
        "Mira hides the ledger.” Empty: no note.",
    )
    authors_note_depth = limits.form_field(
        "play.authors_note_depth",
        label="Depth",
        initial=1,
        help_text="Where it goes: 0 after the closing instruction (read last), 1 just before it, 2 before the "
        "player's action, 3 before the recent turns, 4 at the top.",
    )

    class Meta:
        model = PlaySettings
        fields = ("authors_note", "authors_note_depth", *FIELDS)

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        for name in FIELDS:
            field = limits.form_field(
                f"play.{name}",
                label=LABELS[name],
                help_text=f"{HELP[name]} Empty: the universe's or the environment's value.",
            )
            field.widget.attrs["step"] = "1" if name == "max_tokens" else "any"
            self.fields[name] = field
        for field in self.fields.values():
            field.show_hidden_initial = True  # the page sends back what it showed: changes are against that

    def changes(self) -> dict:
        """The settings this submission changes, as `play_settings_update` takes them.

        A field counts as changed against the value the page showed (its hidden initial), so a
        setting changed elsewhere since the page was loaded is kept unless this page changed it;
        a post without the shown values (a script) is compared with the row as it is.
        """
        out = {}
        for name, field in self.fields.items():
            bound = self[name]
            try:
                shown = (
                    field.to_python(self.data[bound.html_initial_name])
                    if bound.html_initial_name in self.data
                    else bound.initial
                )
            except forms.ValidationError:
                shown = object()  # an unreadable shown value: count the field as changed
            if field.has_changed(shown, bound.data):
                out[name] = self.cleaned_data[name]
        return out

"""Forms for the playtesting pages: validation only, the writes live in services.

The fields that store into a save (its name, a turn's input and narrative) are the declared
limits' form fields (`studio/limits.py`): the same checks as the API, the proxy, the
importers and the save file. A page asks one thing more: a turn written or edited by hand
needs some narrative.
"""

from __future__ import annotations

from django import forms

from studio import limits
from studio.world.models import MemoryMode, Universe

MAX_IMPORT_BYTES = 5 * 1024 * 1024


class UniverseChoiceField(forms.ModelChoiceField):
    def label_from_instance(self, obj: Universe) -> str:
        return obj.name


class SaveCreateForm(forms.Form):
    universe = UniverseChoiceField(
        queryset=Universe.objects.none(),
        help_text="The world this save plays in. Its metadata (missions included) is copied into "
        "the save now; later Lore Book edits still reach the save.",
    )
    name = limits.form_field("save.name", help_text="How you will find this save again, e.g. “Mira refuses the loan”.")
    memory_mode = forms.ChoiceField(
        choices=MemoryMode.choices,
        initial=MemoryMode.CLASSIC,
        help_text="Classic: each turn is embedded and searched by words and meaning; no LLM needed. "
        "Living: each turn also goes to the LLM, which extracts facts, forms beliefs and writes "
        "mental models. Fixed once the save exists.",
    )
    LIVING_WHY = "Living is chosen because a model is connected: its memory forms as you play."
    CLASSIC_WHY = (
        "Classic is chosen because no model is connected (AXIOM_LLM_BASE_URL is not set): living "
        "memory would only report “no LLM”."
    )
    beliefs_enabled = forms.BooleanField(
        required=False,
        initial=True,
        label="Beliefs on",
        help_text="Living mode only. Off: facts are still extracted, but no beliefs or mental models form.",
    )

    persona_name = forms.CharField(
        max_length=120,
        required=False,
        label="Player character's name",
        help_text="{{user}}: who “you” are in this universe's stories. Changing it here changes the universe's persona.",
    )
    persona_description = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 3}),
        max_length=4000,
        required=False,
        label="Player character's description",
        help_text="Told to the narrator once per prompt.",
    )
    persona_portrait = forms.FileField(
        required=False,
        label="Portrait (PNG)",
        help_text="Optional; up to 5 MB.",
        widget=forms.FileInput(attrs={"accept": "image/png"}),
    )
    opening = forms.ChoiceField(
        required=False,
        widget=forms.RadioSelect,
        label="Start from",
        help_text="Turn 1 is appended as it reads here; no model is asked.",
    )

    def __init__(
        self,
        *args,
        universes=None,
        llm_connected: bool = False,
        greetings=(),
        persona=None,
        edit_persona: bool = False,
        **kwargs,
    ):
        super().__init__(*args, **kwargs)
        if universes is not None:
            self.fields["universe"].queryset = universes
        # The chosen universe's opening: greeting N is what `opening_accept(number=N)` appends.
        self.fields["opening"].choices = [("", "No opening: I start with my first action")] + [
            (str(n), text) for n, text in enumerate(greetings, start=1)
        ]
        if not greetings:
            del self.fields["opening"]
        # The persona is the universe's: only its authors change it here; others see it.
        if not edit_persona:
            for name in ("persona_name", "persona_description", "persona_portrait"):
                del self.fields[name]
        elif persona is not None and not self.is_bound:
            self.initial.setdefault("persona_name", persona.name)
            self.initial.setdefault("persona_description", persona.description)
        # Living memory by default when it can form; the form says why either way.
        mode = self.fields["memory_mode"]
        mode.initial = MemoryMode.LIVING if llm_connected else MemoryMode.CLASSIC
        mode.help_text = f"{mode.help_text} {self.LIVING_WHY if llm_connected else self.CLASSIC_WHY}"


def default_save_name(universe: Universe) -> str:
    """A name for a new save of `universe` that no save of it has yet ("The Drowned Reach — play 3")."""
    taken = set(universe.saves.values_list("name", flat=True))
    number = len(taken) + 1
    while f"{universe.name} — play {number}" in taken:
        number += 1
    return f"{universe.name} — play {number}"


class TurnAppendForm(forms.Form):
    player_input = limits.form_field("turn.player_input", required=False, widget=forms.Textarea(attrs={"rows": 2}))
    narrative = limits.form_field("turn.narrative", widget=forms.Textarea(attrs={"rows": 6}))

    def clean_narrative(self) -> str:
        text = self.cleaned_data["narrative"].strip()
        if not text:
            raise forms.ValidationError("A turn needs some narrative.")
        return text


class NarrativeEditForm(forms.Form):
    narrative = limits.form_field("turn.narrative", widget=forms.Textarea(attrs={"rows": 6}))

    def clean_narrative(self) -> str:
        text = self.cleaned_data["narrative"].strip()
        if not text:
            raise forms.ValidationError("The narrative cannot be empty.")
        return text


class RewindForm(forms.Form):
    turn = forms.IntegerField(min_value=0, label="Rewind to turn")

    def __init__(self, *args, current_turn: int = 0, **kwargs):
        super().__init__(*args, **kwargs)
        self.current_turn = current_turn
        self.fields["turn"].widget.attrs["max"] = max(current_turn - 1, 0)

    def clean_turn(self) -> int:
        turn = self.cleaned_data["turn"]
        if turn >= self.current_turn:
            raise forms.ValidationError(f"The save is at turn {self.current_turn}; pick a turn before it to rewind.")
        return turn


class ForkForm(forms.Form):
    turn = forms.IntegerField(min_value=0, label="Fork at turn")
    name = limits.form_field(
        "save.name", required=False, help_text="Blank: this save's name followed by “(fork at turn N)”."
    )

    def __init__(self, *args, current_turn: int = 0, **kwargs):
        # Its own ids: the rewind page also shows RewindForm, whose `turn` is id_turn.
        kwargs.setdefault("auto_id", "id_fork_%s")
        super().__init__(*args, **kwargs)
        self.current_turn = current_turn
        self.fields["turn"].widget.attrs["max"] = current_turn

    def clean_turn(self) -> int:
        turn = self.cleaned_data["turn"]
        if turn > self.current_turn:
            raise forms.ValidationError(f"The save only reaches turn {self.current_turn}.")
        return turn


class ImportForm(forms.Form):
    universe = UniverseChoiceField(queryset=Universe.objects.none())
    name = limits.form_field("save.name", required=False, help_text="Blank: taken from the file.")
    memory_mode = forms.ChoiceField(choices=MemoryMode.choices, initial=MemoryMode.CLASSIC)
    beliefs_enabled = forms.BooleanField(required=False, initial=True, label="Beliefs on")
    file = forms.FileField()

    def __init__(self, *args, universes=None, with_mode: bool = True, **kwargs):
        super().__init__(*args, **kwargs)
        if universes is not None:
            self.fields["universe"].queryset = universes
        if not with_mode:
            del self.fields["memory_mode"]
            del self.fields["beliefs_enabled"]

    def clean_file(self):
        upload = self.cleaned_data["file"]
        if upload.size > MAX_IMPORT_BYTES:
            raise forms.ValidationError(f"The file is larger than {MAX_IMPORT_BYTES // (1024 * 1024)} MB.")
        return upload


class SaveImportForm(forms.Form):
    """Upload an exported save file (.axiom-save.json, or .json.gz) into a universe."""

    file = forms.FileField(
        label="Save file",
        help_text="A file from “Export save file” (.axiom-save.json, or gzip-compressed .json.gz).",
    )
    universe = UniverseChoiceField(
        queryset=Universe.objects.none(),
        required=False,
        empty_label="The universe named in the file",
        help_text="Where the new save goes; by default the universe it was exported from.",
    )
    name = limits.form_field("save.name", required=False, help_text="Blank: the save's name in the file.")

    def __init__(self, *args, universes=None, max_bytes: int, **kwargs):
        kwargs.setdefault("auto_id", "save-import-%s")
        super().__init__(*args, **kwargs)
        self.max_bytes = max_bytes
        if universes is not None:
            self.fields["universe"].queryset = universes

    def clean_file(self):
        upload = self.cleaned_data["file"]
        if upload.size > self.max_bytes:
            raise forms.ValidationError(
                f"The file is {upload.size} bytes; the limit is {self.max_bytes} bytes (AXIOM_SAVE_FILE_MAX_BYTES)."
            )
        return upload

"""Forms for the authoring pages. They parse and validate input; services do the writing."""

from __future__ import annotations

import re

from django import forms
from django.core.exceptions import ValidationError
from django.core.validators import validate_slug

from studio.universes import activation as activation_fields
from studio.universes.interchange import MAX_TEXT_CHARS
from studio.world.models import LoreKind
from studio.universes.selectors import LORE_SORTS, lore_title_index
from studio.universes.services import MAX_MISSION_CHARS, meta_validate


class UniverseCreateForm(forms.Form):
    name = forms.CharField(max_length=200)
    slug = forms.SlugField(
        max_length=80,
        required=False,
        help_text="Used in URLs and exports. Leave empty to derive it from the name.",
    )
    description = forms.CharField(widget=forms.Textarea(attrs={"rows": 2}), required=False)


class UniverseRenameForm(forms.Form):
    name = forms.CharField(max_length=200)
    description = forms.CharField(widget=forms.Textarea(attrs={"rows": 3}), required=False)


class MetaForm(forms.Form):
    key = forms.CharField(
        max_length=200,
        widget=forms.TextInput(attrs={"list": "meta-known-keys"}),
        help_text="A key the studio reads (offered as you type) or one of your own.",
    )
    value = forms.CharField(widget=forms.Textarea(attrs={"rows": 3}), required=False, strip=False)

    def clean(self):
        cleaned = super().clean()
        if "key" in cleaned:
            cleaned["value"] = meta_validate(key=cleaned["key"].strip(), value=cleaned.get("value", ""))
            cleaned["key"] = cleaned["key"].strip()
        return cleaned


class PersonaForm(forms.Form):
    """The player's persona (validated again by `services.persona_set`)."""

    name = forms.CharField(
        max_length=120,
        required=False,
        label="Name",
        help_text="{{user}} in lore and prompts; who “you” is in facts, beliefs and mental models. Empty: no persona.",
    )
    description = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 4}),
        required=False,
        max_length=4000,
        label="Description",
        help_text="Who the player character is, told to the narrator once per prompt; never part of a name or a fact.",
    )
    portrait = forms.FileField(
        required=False,
        label="Portrait (PNG)",
        help_text="Optional; up to 5 MB.",
        widget=forms.FileInput(attrs={"accept": "image/png"}),
    )
    remove_portrait = forms.BooleanField(required=False, label="Remove the portrait")


GREETING_SEPARATOR = "---"


class OpeningForm(forms.Form):
    """The universe's opening (validated again by `services.opening_set`)."""

    first_message = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 5}),
        required=False,
        label="First message",
        help_text="Turn 1 as the narrator tells it. {{user}} and {{char}} are filled when play reads it.",
    )
    alternate_greetings = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 6}),
        required=False,
        label="Alternate greetings",
        help_text=f"Other first messages to choose from, separated by a line holding only {GREETING_SEPARATOR}.",
    )
    scenario = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 3}),
        required=False,
        label="Scenario",
        help_text="The situation when the story starts, for the narrator: {{scenario}} in its instructions.",
    )

    def clean_alternate_greetings(self) -> list[str]:
        return greetings_from_text(self.cleaned_data.get("alternate_greetings", ""))


def greetings_from_text(text: str) -> list[str]:
    """Split the form's greetings on lines holding only `---`."""
    greetings, current = [], []
    for line in (text or "").splitlines():
        if line.strip() == GREETING_SEPARATOR:
            greetings.append("\n".join(current).strip())
            current = []
        else:
            current.append(line)
    greetings.append("\n".join(current).strip())
    return [g for g in greetings if g]


def greetings_as_text(greetings: list[str]) -> str:
    """The form's text for a list of greetings (`greetings_from_text` reads it back)."""
    return f"\n{GREETING_SEPARATOR}\n".join(greetings)


_REGEX_DONE = re.compile(r"^/.+/[A-Za-z]*$", re.DOTALL)


def _split_keys(raw: str) -> list[str]:
    """Split on commas and line breaks, except commas inside a /pattern/flags key (`/a{1,3}/`)."""
    keys: list[str] = []
    for line in (raw or "").splitlines():
        pending = ""
        for part in line.split(","):
            pending = f"{pending},{part}" if pending else part
            if pending.strip().startswith("/") and not _REGEX_DONE.match(pending.strip()):
                continue  # an unfinished regex: the comma belongs to it
            if pending.strip():
                keys.append(pending.strip())
            pending = ""
        if pending.strip():
            keys.append(pending.strip())
    return keys


_TRI_STATE = [("", "Universe default"), ("true", "Yes"), ("false", "No")]


def _tri_state(value: str):
    return {"true": True, "false": False}.get(value)


def _activation_form_field(f: activation_fields.ActivationField) -> forms.Field:
    common = {"label": f.label, "help_text": f.help, "required": False}
    if f.kind == "bool":
        return forms.BooleanField(**common)
    if f.kind == "bool?":
        # group scoring has no universe setting: empty means off there
        choices = [("", "Default (off)"), *_TRI_STATE[1:]] if f.name == "group_scoring" else _TRI_STATE
        return forms.TypedChoiceField(choices=choices, coerce=_tri_state, empty_value=None, **common)
    if f.kind in ("int", "int?"):
        return forms.IntegerField(min_value=f.minimum, max_value=f.maximum, **common)
    if f.kind == "choice":
        coerce = int if isinstance(f.default, int) else str
        return forms.TypedChoiceField(choices=f.choices, coerce=coerce, **common)
    if f.kind == "choice?":
        return forms.TypedChoiceField(choices=[("", "—"), *f.choices], coerce=int, empty_value=None, **common)
    if f.kind == "key_groups":
        return forms.CharField(widget=forms.Textarea(attrs={"rows": 2}), **common)
    if f.kind == "keys":
        return forms.CharField(widget=forms.TextInput(attrs={"placeholder": "key, another key"}), **common)
    return forms.CharField(max_length=f.maximum or None, **common)


def _activation_initial(name: str, value):
    f = activation_fields.BY_NAME[name]
    if f.kind == "keys":
        return ", ".join(value or [])
    if f.kind == "key_groups":
        return "\n".join(", ".join(group) for group in value or [])
    if f.kind == "bool?":
        return "" if value is None else ("true" if value else "false")
    return value


def _link_names(entry) -> list[str]:
    """How the links field names the linked entries: by title, or by id where the title is not
    unique (an imported card's book may hold an entry titled like one already in the universe)."""
    links = list(entry.links.all())
    if not links:
        return []
    titles = [
        t.casefold()
        for t in entry.universe.lore_entries.filter(title__in={link.title for link in links}).values_list(
            "title", flat=True
        )
    ]
    return [link.title if titles.count(link.title.casefold()) <= 1 else link.entry_id for link in links]


class LoreEntryForm(forms.Form):
    """One lore entry. Links are typed as titles (one per line) and resolved to entries."""

    title = forms.CharField(max_length=300)
    # No kind is preselected: a new entry's kind is the author's choice (it decides who can know it,
    # what a character index reads, how it is filtered), never a silent Concept.
    kind = forms.ChoiceField(choices=[("", "Choose a kind…"), *LoreKind.choices])
    entry_id = forms.CharField(
        max_length=120,
        required=False,
        validators=[validate_slug],
        help_text="Stable id used by links, exports and the engine. Leave empty to derive it from the title.",
    )
    keys = forms.CharField(
        required=False,
        help_text="Aliases and trigger keys, separated by commas.",
        widget=forms.TextInput(attrs={"placeholder": "alias, another alias"}),
    )
    text = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 5}), required=False, strip=False, max_length=MAX_TEXT_CHARS
    )
    links = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 3, "list": "lore-titles"}),
        required=False,
        help_text="Titles of entries this one links to, one per line (or an entry id). A title no entry has "
        "yet is kept as a pending link and becomes a link when that entry is written.",
    )
    secrecy = forms.ChoiceField(
        required=False,
        label="Who knows this",
        choices=[
            ("everyone", "Everyone (common knowledge)"),
            ("some", "Only the characters or factions below"),
            ("narrator", "Nobody: a secret only the narrator holds"),
        ],
        help_text="Characters on scene speak only from what they know; a secret reaches the narrator marked "
        "narrator-only until it is revealed to someone (Who knows what).",
    )
    known_by = forms.CharField(
        required=False,
        label="Known by",
        help_text="Characters, factions or other entries, separated by commas; a faction stands for the "
        "characters linked to it.",
        widget=forms.TextInput(attrs={"placeholder": "Odile Sarn, The Brine Wardens"}),
    )
    # Present only where the form shows the activation fieldsets; without it (the inline
    # rows of the list) the activation fields are left as they are.
    activation_shown = forms.BooleanField(required=False, widget=forms.HiddenInput)
    # The entry version this edit started from; the service refuses to save over a newer one.
    base_version = forms.IntegerField(required=False, min_value=1, widget=forms.HiddenInput)

    BASE_FIELDS = ("title", "kind", "entry_id", "keys", "text", "links", "secrecy", "known_by")

    def __init__(self, *args, universe, entry=None, **kwargs):
        self.universe = universe
        self.entry = entry
        initial = kwargs.setdefault("initial", {})
        initial.setdefault("activation_shown", True)
        values = (
            activation_fields.activation_values(entry) if entry is not None else dict(activation_fields.STUDIO_DEFAULTS)
        )
        for name, value in values.items():
            initial.setdefault(name, _activation_initial(name, value))
        if entry is not None:
            initial.update(
                title=entry.title,
                kind=entry.kind,
                entry_id=entry.entry_id,
                keys=", ".join(entry.keys or []),
                text=entry.text,
                links="\n".join([*_link_names(entry), *entry.pending_links.values_list("name", flat=True)]),
                base_version=entry.version,
                secrecy="everyone" if entry.known_by is None else ("some" if entry.known_by else "narrator"),
                known_by=", ".join(entry.known_by or []),
            )
        super().__init__(*args, **kwargs)
        for f in activation_fields.FIELDS:
            self.fields[f.name] = _activation_form_field(f)
        self.fields["keys"].help_text = (
            "Aliases and trigger keys, separated by commas. A key written /pattern/flags is a regular "
            "expression (flags g i m s u y), as in SillyTavern."
        )
        if entry is not None:
            self.fields["entry_id"].disabled = True
            self.fields["entry_id"].help_text = "The id stays fixed so links and saves keep pointing here."

    def base_field_list(self):
        return [self[name] for name in self.BASE_FIELDS]

    def activation_sections(self):
        """The activation fields grouped so the form explains itself: [(section, [bound fields])]."""
        return [
            (section, [self[f.name] for f in activation_fields.FIELDS if f.section == section])
            for section in activation_fields.SECTIONS
        ]

    MISSING_BASE_VERSION = (
        "This edit does not say which version of the entry it started from (base_version), so it could "
        "overwrite a newer one; nothing was saved. Reload the entry and make the edit again."
    )

    def _clean_known_by(self, cleaned) -> None:
        """`known_by_value`: None (everyone), [] (narrator only), the names, or absent (not on this form)."""
        if self.add_prefix("secrecy") not in self.data:
            return  # the inline rows do not show secrecy: leave it as it is
        secrecy = cleaned.get("secrecy") or "everyone"
        names = _split_keys(cleaned.get("known_by") or "")
        if secrecy == "some" and not names:
            self.add_error("known_by", "Name who knows it, or choose “Everyone” or “Nobody”.")
        cleaned["known_by_value"] = None if secrecy == "everyone" else ([] if secrecy == "narrator" else names)

    def clean(self):
        cleaned = super().clean()
        self._clean_known_by(cleaned)
        cleaned["pending_links"] = getattr(self, "pending_links", [])
        if self.entry is not None and cleaned.get("base_version") is None and "base_version" not in self.errors:
            # An edit must say which version it started from, or it could overwrite a newer one.
            self.add_error(None, self.MISSING_BASE_VERSION)
        if not cleaned.get("activation_shown"):
            cleaned["activation"] = None
            keys = cleaned.get("keys") or []
            try:
                activation_fields.activation_validate({}, primary_keys=keys)
            except ValidationError as exc:
                self.add_error("keys", exc.message_dict.get("keys"))
            return cleaned
        values = {}
        for f in activation_fields.FIELDS:
            if f.name not in cleaned:
                continue  # the field's own validation failed; its error is shown
            value = cleaned[f.name]
            if f.kind == "keys":
                value = _split_keys(value or "")
            elif f.kind == "key_groups":
                value = [_split_keys(line) for line in (value or "").splitlines() if line.strip()]
            elif f.kind == "int" and value is None:
                value = f.default
            elif f.kind == "str":
                value = value or ""
            values[f.name] = value
        try:
            cleaned["activation"] = activation_fields.activation_validate(
                values, primary_keys=cleaned.get("keys") or []
            )
        except ValidationError as exc:
            for name, messages in exc.message_dict.items():
                self.add_error(name if name in self.fields else None, messages)
        return cleaned

    def mentioned_titles(self, limit: int = 12) -> list[str]:
        """Titles of other entries the text mentions but does not link to yet (a hint)."""
        if self.entry is None or not self.entry.text:
            return []
        words = re.findall(r"\w+", self.entry.text.casefold())
        normalized, word_set = f" {' '.join(words)} ", set(words)
        linked = {link.pk for link in self.entry.links.all()}
        found = []
        for pk, _entry_id, title in lore_title_index(universe=self.universe):
            if pk == self.entry.pk or pk in linked:
                continue
            title_words = re.findall(r"\w+", title.casefold())
            if not title_words or (len(title_words) == 1 and len(title_words[0]) < 3):
                continue
            if title_words[0] in word_set if len(title_words) == 1 else f" {' '.join(title_words)} " in normalized:
                found.append(title)
                if len(found) >= limit:
                    break
        return found

    def clean_keys(self) -> list[str]:
        return _split_keys(self.cleaned_data.get("keys", ""))

    def clean_entry_id(self) -> str:
        entry_id = self.cleaned_data.get("entry_id", "")
        if self.entry is None and entry_id and self.universe.lore_entries.filter(entry_id=entry_id).exists():
            raise ValidationError(f"The id “{entry_id}” is already used in this Lore Book.")
        return entry_id

    def clean_links(self):
        """Return the linked entries; names no entry has yet go to `cleaned_data["pending_links"]`."""
        names = [line.strip() for line in self.cleaned_data.get("links", "").splitlines() if line.strip()]
        self.pending_links = []
        if not names:
            return []
        own_title = (self.cleaned_data.get("title") or (self.entry.title if self.entry else "")).strip().casefold()
        index = lore_title_index(universe=self.universe)
        by_title: dict[str, list[tuple[int, str, str]]] = {}
        by_id = {}
        for row in index:
            by_title.setdefault(row[2].casefold(), []).append(row)
            by_id[row[1]] = row
        own_pk = self.entry.pk if self.entry is not None else None
        chosen, errors = [], []
        for name in names:
            rows = by_title.get(name.casefold())
            if rows is None and name in by_id:
                rows = [by_id[name]]
            if not rows:
                if name.casefold() == own_title:
                    errors.append("An entry cannot link to itself.")
                elif name.casefold() not in {n.casefold() for n in self.pending_links}:
                    self.pending_links.append(name)  # not written yet: kept until it is
            elif len(rows) > 1:
                ids = ", ".join(r[1] for r in rows)
                errors.append(f"Several entries are titled “{name}”; write one of their ids instead: {ids}.")
            elif rows[0][0] == own_pk:
                errors.append("An entry cannot link to itself.")
            elif rows[0][0] not in chosen:
                chosen.append(rows[0][0])
        if errors:
            raise ValidationError(errors)
        return list(self.universe.lore_entries.filter(pk__in=chosen))


class LoreFilterForm(forms.Form):
    q = forms.CharField(required=False, label="Search")
    mode = forms.ChoiceField(
        choices=[("text", "Text"), ("semantic", "Meaning")],
        required=False,
        initial="text",
    )
    kind = forms.ChoiceField(choices=[("", "All kinds"), *LoreKind.choices], required=False)
    sort = forms.ChoiceField(choices=[(k, v[0]) for k, v in LORE_SORTS.items()], required=False, initial="title")


class BulkActionForm(forms.Form):
    ACTIONS = [
        ("delete", "Delete"),
        ("kind", "Change kind"),
        ("export", "Export"),
        ("enable", "Enable"),
        ("disable", "Disable"),
        ("vectorize", "Found by meaning: on"),
        ("unvectorize", "Found by meaning: off"),
    ]
    ACTIVATION_ACTIONS = {
        "enable": {"enabled": True},
        "disable": {"enabled": False},
        "vectorize": {"vectorized": True},
        "unvectorize": {"vectorized": False},
    }
    EXPORT_FORMATS = [
        ("toml", "Universe-as-Code TOML"),
        ("sillytavern", "SillyTavern world info"),
        ("card", "Character Card V2 JSON"),
    ]
    entries = forms.Field(required=False, widget=forms.MultipleHiddenInput)
    action = forms.ChoiceField(choices=ACTIONS)
    new_kind = forms.ChoiceField(choices=LoreKind.choices, required=False)
    export_format = forms.ChoiceField(choices=EXPORT_FORMATS, required=False, initial="toml")

    def __init__(self, *args, universe, **kwargs):
        super().__init__(*args, **kwargs)
        self.universe = universe

    def clean_entries(self):
        # Ids are looked up inside this universe only, so others' ids simply match nothing.
        entries = [e for e in self.data.getlist("entries") if e][:10_000]
        if not entries:
            raise ValidationError("Select at least one entry.")
        return entries

    def clean(self):
        cleaned = super().clean()
        if cleaned.get("action") == "kind" and not cleaned.get("new_kind"):
            self.add_error("new_kind", "Choose the new kind.")
        return cleaned


class UniverseMissionForm(forms.Form):
    # Reads the field only: the length and every other rule are checked by `missions_set`.
    mission = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 3, "maxlength": MAX_MISSION_CHARS}),
        required=False,
        help_text="What every character tends to remember, unless a character has its own mission.",
    )


class MissionsTextForm(forms.Form):
    text = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 8}),
        required=False,
        help_text="One “Name: mission” per line. Lines without a colon are ignored.",
    )


class LoreImportForm(forms.Form):
    FORMATS = [
        ("auto", "Detect from the file"),
        ("card", "Character Card V2/V3 (JSON or PNG)"),
        ("sillytavern", "SillyTavern world info (JSON)"),
    ]
    file = forms.FileField(required=False)
    format = forms.ChoiceField(choices=FORMATS, initial="auto")
    default_kind = forms.ChoiceField(
        choices=LoreKind.choices,
        initial=LoreKind.CONCEPT,
        help_text="Kind given to new entries the file does not classify.",
    )
    character = forms.ChoiceField(
        label="The card's character",
        choices=[
            ("create", "Create a new Character entry"),
            ("update", "Update the Character entry this card came from (same studio id, else same name)"),
        ],
        initial="create",
        required=False,
        help_text="Character Cards only. Updating also updates the entries of the card's book, matched by "
        "the ids they had in the card.",
    )
    match_titles = forms.BooleanField(
        label="Merge the card's book into existing entries with the same title",
        required=False,
        help_text="Character Cards only. Off: the book stays its own set of entries, tagged with the card.",
    )
    # The second step of an import that would merge by title: the file kept since the preview
    # (interchange/pending.py), its name, and the author's answer.
    token = forms.CharField(widget=forms.HiddenInput, required=False, max_length=64)
    filename = forms.CharField(widget=forms.HiddenInput, required=False, max_length=300)
    titles = forms.ChoiceField(
        widget=forms.HiddenInput,
        required=False,
        choices=[("", "ask"), ("merge", "merge by title"), ("new", "import as new entries")],
    )

    def clean(self):
        cleaned = super().clean()
        if not cleaned.get("file") and not cleaned.get("token"):
            self.add_error("file", "Choose a file to import.")
        return cleaned


class TomlImportForm(forms.Form):
    file = forms.FileField(required=False, help_text="A .toml file exported by this studio (or written by hand).")
    token = forms.CharField(widget=forms.HiddenInput, required=False, max_length=64)
    digest = forms.CharField(widget=forms.HiddenInput, required=False, max_length=64)

    def __init__(self, *args, **kwargs):
        # Its own ids: the Import / export page also shows LoreImportForm, whose `file` is id_file.
        kwargs.setdefault("auto_id", "id_toml_%s")
        super().__init__(*args, **kwargs)

    def clean(self):
        cleaned = super().clean()
        if not cleaned.get("file") and not cleaned.get("token"):
            raise ValidationError("Choose a TOML file to import.")
        return cleaned

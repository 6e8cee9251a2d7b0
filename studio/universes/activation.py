"""The activation fields of a lore entry: one table that forms, services, TOML and importers share.

Each field is a LoreEntry column (see models.py); this table gives its kind, the value a
studio-written entry starts with, the form section it belongs to and its help text.
`activation_validate` is the one check every write path uses: it normalises the values and
raises ValidationError naming the field (and, for keys, the key) that is wrong. Regex keys
(`/pattern/flags`) are compiled with the engine's own parser, so what the studio accepts is
exactly what the engine can run.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.core.exceptions import ValidationError

from studio.memory.lore_activation import (
    ENGINE_REGEX,
    MAX_SCAN_DEPTH,
    META_CASE_SENSITIVE,
    META_MATCH_WHOLE_WORDS,
    META_SCAN_DEPTH,
    key_errors,
    key_hazards,
    parse_regex_key,
)
from studio.universes.interchange import MAX_KEY_CHARS, MAX_KEYS
from studio.world.models import AfterFirstMatch, ForcedActivation, LorePosition, LoreRole, SelectiveLogic

MAX_DEPTH = 10_000
MAX_WINDOW = 100_000  # sticky / cooldown / delay / decorator counts, in messages or narrations


@dataclass(frozen=True)
class ActivationField:
    name: str
    kind: str  # bool, bool?, int, int?, str, choice, choice?, keys, key_groups
    default: Any
    section: str
    label: str
    help: str = ""
    minimum: int | None = None
    maximum: int | None = None
    choices: tuple = ()


SECTIONS = ("Keys", "When it fires", "Groups", "Timing", "Recursion", "Budget & placement")

FIELDS: tuple[ActivationField, ...] = (
    ActivationField(
        "secondary_keys",
        "keys",
        [],
        "Keys",
        "Secondary keys",
        "Checked after a primary key matched, with the logic below. Separate with commas; "
        "a key written /pattern/flags is a regular expression.",
    ),
    ActivationField("selective", "bool", True, "Keys", "Use the secondary keys"),
    ActivationField(
        "selective_logic",
        "choice",
        SelectiveLogic.AND_ANY,
        "Keys",
        "Secondary logic",
        choices=tuple(SelectiveLogic.choices),
    ),
    ActivationField(
        "case_sensitive",
        "bool?",
        None,
        "Keys",
        "Case-sensitive keys",
        f"Empty: the universe default ({META_CASE_SENSITIVE}).",
    ),
    ActivationField(
        "match_whole_words",
        "bool?",
        None,
        "Keys",
        "Match whole words",
        "One-word keys match only as a whole word; keys of several words match anywhere, as in "
        f"SillyTavern. Empty: the universe default ({META_MATCH_WHOLE_WORDS}).",
    ),
    ActivationField(
        "additional_keys",
        "key_groups",
        [],
        "Keys",
        "Additional keys (@@additional_keys)",
        "One group per line, keys separated by commas: one key of every group must also appear.",
    ),
    ActivationField(
        "exclude_keys",
        "keys",
        [],
        "Keys",
        "Exclude keys (@@exclude_keys)",
        "The entry does not fire if any of these appears.",
    ),
    ActivationField("enabled", "bool", True, "When it fires", "Enabled", "A disabled entry never fires."),
    ActivationField(
        "constant", "bool", False, "When it fires", "Constant", "Always fires while enabled; no key needed."
    ),
    ActivationField("forced", "choice", "", "When it fires", "Forced", choices=tuple(ForcedActivation.choices)),
    ActivationField(
        "scan_depth",
        "int?",
        None,
        "When it fires",
        "Scan depth (messages)",
        "How many recent messages are searched for the keys: the pending input is 1, the last "
        "narration 2, the last player input 3, and so on. Empty: the universe default "
        f"({META_SCAN_DEPTH}); 0 scans nothing.",
        0,
        MAX_SCAN_DEPTH,
    ),
    ActivationField(
        "probability",
        "int",
        100,
        "When it fires",
        "Probability (%)",
        "Chance that a matched entry is used; each roll is seeded by the save and the turn.",
        0,
        100,
    ),
    ActivationField("use_probability", "bool", True, "When it fires", "Use the probability"),
    ActivationField(
        "activate_only_after",
        "int",
        0,
        "When it fires",
        "Only after N narrations (@@activate_only_after)",
        "0 = off.",
        0,
        MAX_WINDOW,
    ),
    ActivationField(
        "activate_only_every",
        "int",
        0,
        "When it fires",
        "Only every N narrations (@@activate_only_every)",
        "0 = off.",
        0,
        MAX_WINDOW,
    ),
    ActivationField(
        "after_first_match",
        "choice",
        "",
        "When it fires",
        "After its first match",
        choices=tuple(AfterFirstMatch.choices),
    ),
    ActivationField(
        "inclusion_group",
        "str",
        "",
        "Groups",
        "Inclusion groups",
        "Comma-separated names; of the entries of one group that fire together, only one is used.",
        maximum=300,
    ),
    ActivationField(
        "group_prioritize",
        "bool",
        False,
        "Groups",
        "Prioritise in the group",
        "Among prioritised members the highest insertion order wins; otherwise a weighted draw.",
    ),
    ActivationField("group_weight", "int", 100, "Groups", "Group weight", "Chance in the weighted draw.", 0, 1_000_000),
    ActivationField(
        "group_scoring",
        "bool?",
        None,
        "Groups",
        "Group scoring",
        "Only the members matching the most keys stay in the draw. Empty: off.",
    ),
    ActivationField(
        "sticky",
        "int",
        0,
        "Timing",
        "Sticky (messages)",
        "Stays active this many messages after it fired (a turn is two messages). 0 = off.",
        0,
        MAX_WINDOW,
    ),
    ActivationField(
        "cooldown",
        "int",
        0,
        "Timing",
        "Cooldown (messages)",
        "Cannot fire again for this many messages after it fired (or after its sticky window).",
        0,
        MAX_WINDOW,
    ),
    ActivationField(
        "delay",
        "int",
        0,
        "Timing",
        "Delay (messages)",
        "Cannot fire before the chat holds this many messages.",
        0,
        MAX_WINDOW,
    ),
    ActivationField("exclude_recursion", "bool", False, "Recursion", "Not activated by other entries"),
    ActivationField("prevent_recursion", "bool", False, "Recursion", "Does not activate other entries"),
    ActivationField(
        "delay_until_recursion",
        "int",
        0,
        "Recursion",
        "Delay until recursion (level)",
        "0 = off; N = fires only in a recursion pass, at level N or later.",
        0,
        1000,
    ),
    ActivationField(
        "insertion_order",
        "int",
        100,
        "Budget & placement",
        "Insertion order",
        "Higher first when the budget is tight and in a prioritised group; lower earlier in the prompt.",
        -1_000_000,
        1_000_000,
    ),
    ActivationField(
        "priority",
        "int?",
        None,
        "Budget & placement",
        "Budget priority",
        "Character Card priority: higher is kept first under the budget. Empty: the insertion order.",
        -1_000_000,
        1_000_000,
    ),
    ActivationField(
        "position",
        "choice",
        LorePosition.BEFORE_CHAR,
        "Budget & placement",
        "Position",
        choices=tuple(LorePosition.choices),
    ),
    ActivationField(
        "depth", "int", 4, "Budget & placement", "Depth", "For “in the history, at a depth”.", 0, MAX_DEPTH
    ),
    ActivationField(
        "role",
        "choice?",
        None,
        "Budget & placement",
        "Role",
        "For “at a depth”; empty: system.",
        choices=tuple(LoreRole.choices),
    ),
    ActivationField(
        "ignore_budget", "bool", False, "Budget & placement", "Ignore the budget", "Always included once it fires."
    ),
    ActivationField(
        "ignore_on_max_context",
        "bool",
        False,
        "Budget & placement",
        "Trim first when the budget is full (@@ignore_on_max_context)",
    ),
    ActivationField(
        "vectorized",
        "bool",
        True,
        "Budget & placement",
        "Also found by meaning",
        "The entry may also be included because it is close in meaning to the scene.",
    ),
)
BY_NAME = {f.name: f for f in FIELDS}
NAMES = tuple(f.name for f in FIELDS)
STUDIO_DEFAULTS: dict[str, Any] = {
    f.name: (list(f.default) if isinstance(f.default, list) else f.default) for f in FIELDS
}
# Where a new studio entry differs from a SillyTavern / Character Card one: written here, it
# is also found by meaning (the "on by default for entries written in the studio").


def activation_values(entry) -> dict[str, Any]:
    """Return the entry's activation fields as plain values (the revision / TOML form)."""
    values = {}
    for f in FIELDS:
        value = getattr(entry, f.name)
        if f.kind == "keys":
            value = list(value or [])
        elif f.kind == "key_groups":
            value = [list(group) for group in value or []]
        elif f.kind in ("choice", "choice?") and value is not None and not isinstance(value, str):
            value = int(value)
        values[f.name] = value
    return values


def _clean_key_list(value: Any, label: str, errors: dict, name: str) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, (list, tuple)) or not all(isinstance(k, str) for k in value):
        errors[name] = f"{label}: expected a list of keys."
        return []
    keys, seen = [], set()
    for key in value:
        key = key.strip()
        if key and key not in seen:
            seen.add(key)
            keys.append(key)
    if len(keys) > MAX_KEYS:
        errors[name] = f"{label}: {len(keys)} keys; the limit is {MAX_KEYS}."
    elif any(len(k) > MAX_KEY_CHARS for k in keys):
        errors[name] = f"{label}: a key is longer than {MAX_KEY_CHARS} characters."
    return keys


def activation_validate(
    values: dict[str, Any], *, strict_keys: bool = True, primary_keys: list[str] | None = None
) -> dict[str, Any]:
    """Return the cleaned activation values; raise ValidationError naming each bad field.

    Missing fields are left out (the caller keeps the current or default value). With
    `strict_keys`, a regex-shaped key that does not compile is an error naming the key
    (`primary_keys` are checked too, under "keys"); imports pass strict_keys=False, because
    SillyTavern matches such a key as plain text and the import report says so. Always (every
    write path: form, bulk edit, imports, restores): the key limits, also for `primary_keys`,
    and a regex key known to be catastrophic is refused (`key_hazards`).
    """
    errors: dict[str, Any] = {}
    clean: dict[str, Any] = {}
    for name, value in values.items():
        f = BY_NAME.get(name)
        if f is None:
            errors[name] = f"Unknown activation field “{name}”."
            continue
        if f.kind == "keys":
            clean[name] = _clean_key_list(value, f.label, errors, name)
        elif f.kind == "key_groups":
            groups = []
            if not isinstance(value, (list, tuple)):
                errors[name] = f"{f.label}: expected a list of key groups."
            else:
                for group in value:
                    keys = _clean_key_list(group, f.label, errors, name)
                    if keys:
                        groups.append(keys)
            clean[name] = groups
        elif f.kind in ("bool", "bool?"):
            if value is None and f.kind == "bool?":
                clean[name] = None
            elif isinstance(value, bool):
                clean[name] = value
            else:
                errors[name] = f"{f.label}: expected true or false, got {value!r}."
        elif f.kind in ("int", "int?"):
            if value is None and f.kind == "int?":
                clean[name] = None
            elif isinstance(value, bool) or not isinstance(value, int):
                errors[name] = f"{f.label}: expected a whole number, got {value!r}."
            elif (f.minimum is not None and value < f.minimum) or (f.maximum is not None and value > f.maximum):
                errors[name] = f"{f.label}: {value} is outside {f.minimum}..{f.maximum}."
            else:
                clean[name] = value
        elif f.kind in ("choice", "choice?"):
            allowed = [c[0] for c in f.choices]
            if value is None and f.kind == "choice?":
                clean[name] = None
            elif value in allowed and not isinstance(value, bool):
                clean[name] = value
            else:
                errors[name] = f"{f.label}: {value!r} is not one of {', '.join(map(repr, allowed))}."
        elif f.kind == "str":
            if not isinstance(value, str):
                errors[name] = f"{f.label}: expected text."
            elif f.maximum and len(value) > f.maximum:
                errors[name] = f"{f.label}: longer than {f.maximum} characters."
            else:
                clean[name] = ", ".join(part.strip() for part in value.split(",") if part.strip())
    if primary_keys is not None:
        _clean_key_list(list(primary_keys), "Keys", errors, "keys")
    for name, keys in (
        ("keys", primary_keys or []),
        ("secondary_keys", clean.get("secondary_keys", [])),
        ("exclude_keys", clean.get("exclude_keys", [])),
        ("additional_keys", [k for g in clean.get("additional_keys", []) for k in g]),
    ):
        if name not in errors:
            problems = key_hazards(keys)
            if problems:
                errors[name] = problems
    if strict_keys:
        for name, keys in (
            ("keys", primary_keys or []),
            ("secondary_keys", clean.get("secondary_keys", [])),
            ("exclude_keys", clean.get("exclude_keys", [])),
            ("additional_keys", [k for g in clean.get("additional_keys", []) for k in g]),
        ):
            problems = key_errors(keys)
            if problems and name not in errors:
                errors[name] = problems
    if errors:
        raise ValidationError(errors)
    return clean


def _all_keys(entry_or_values) -> list[str]:
    get = entry_or_values.get if isinstance(entry_or_values, dict) else lambda n, d=None: getattr(entry_or_values, n, d)
    keys = list(get("keys", []) or []) + list(get("secondary_keys", []) or []) + list(get("exclude_keys", []) or [])
    keys += [k for group in get("additional_keys", []) or [] for k in group]
    return keys


def invalid_regex_keys(entry_or_values) -> list[str]:
    """Return the regex-shaped keys of an entry that do not compile (kept from imports)."""
    return [message for message in key_errors(_all_keys(entry_or_values))]


def hazardous_regex_keys(entry_or_values) -> list[str]:
    """Return a message per regex key of an entry refused as catastrophic (see `key_hazards`)."""
    return key_hazards(_all_keys(entry_or_values))


def bounded_regex_keys(entry_or_values) -> list[str]:
    """Return the entry's regex keys that run on the `regex` module with a time limit (not on RE2)."""
    return [
        key
        for key in _all_keys(entry_or_values)
        if (compiled := parse_regex_key(key)[0]) is not None and compiled.engine == ENGINE_REGEX
    ]


def _display(f: ActivationField, value: Any) -> str:
    if f.kind in ("keys",):
        return ", ".join(value) if value else "—"
    if f.kind == "key_groups":
        return " · ".join(", ".join(group) for group in value) if value else "—"
    if f.kind == "bool":
        return "yes" if value else "no"
    if f.kind == "bool?":
        if value is None:
            return "default (off)" if f.name == "group_scoring" else "universe default"
        return "yes" if value else "no"
    if f.kind in ("choice", "choice?"):
        if value is None:
            return "—"
        return dict(f.choices).get(value, str(value))
    if f.kind == "int?":
        if value is None:
            return "the insertion order" if f.name == "priority" else "universe default"
        return str(value)
    return str(value) if value not in ("", None) else "—"


def activation_display(entry) -> list[tuple[str, list[tuple[str, str, bool]]]]:
    """Return [(section, [(label, shown value, differs from a new studio entry)])] for a detail page."""
    values = activation_values(entry)
    return [
        (
            section,
            [
                (f.label, _display(f, values[f.name]), values[f.name] != STUDIO_DEFAULTS[f.name])
                for f in FIELDS
                if f.section == section
            ],
        )
        for section in SECTIONS
    ]

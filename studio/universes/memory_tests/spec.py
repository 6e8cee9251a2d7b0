"""The declarative form of a memory test: one flat record, checked by one function for every path.

The Tests page's form, the API's JSON body and a `[[memory_tests]]` table of Universe-as-Code
all carry the same fields, and all go through `parse_spec`, so a test one path refuses every
path refuses with the same message::

    name         a slug, unique in the universe: how results, the API and the file name the test
    kind         knows | context | belief | no_findings
    turn         N: the test holds at or after turn N (a save standing before N is not judged)
    until        M (optional): and up to turn M (a save standing after M is not judged); for
                 `no_findings`, the last turn of the range instead (every save at N or later is judged)
    description  optional prose

and the fields of its kind (`KIND_FIELDS`):

- `knows`: at or after turn N, `character` knows (`knows = true`) or does not know
  (`knows = false`) the Lore Book entry `entry` or a fact whose statement holds the phrase `fact`
  (one of the two);
- `context`: the narrator's prompt for the player's action `action`, built as the narrator
  builds it for the save's next turn, includes (`includes = true`) or excludes the entry
  `entry`; `pov` optionally names the characters whose point of view the memory carries;
- `belief`: a belief about `subject` (whose statement holds `statement`, when given; held by
  `holder`, when given) exists (`exists = true`, or does not) with the trend `trend`
  (`any`, or one of the engine's trends);
- `no_findings`: the continuity guard recorded no finding of kind `finding` (`any`, `leak`,
  `contradiction`, `presence`) in turns N to M (to the save's turn when M is not given).

Nothing here imports Django: the universes app stores the record, the saves app judges it.
Errors are collected for every field at once (`SpecError.errors`: {field: [messages]}).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Mapping

from studio import limits

KNOWS, CONTEXT, BELIEF, NO_FINDINGS = "knows", "context", "belief", "no_findings"
KINDS = (KNOWS, CONTEXT, BELIEF, NO_FINDINGS)
KIND_LABELS = {
    KNOWS: "A character knows / does not know",
    CONTEXT: "The narrator's context includes / excludes",
    BELIEF: "A belief exists with a trend",
    NO_FINDINGS: "No continuity finding",
}
TRENDS = ("any", "new", "strengthening", "stable", "weakening", "stale")  # the engine's trends (observations.py)
FINDING_KINDS = ("any", "leak", "contradiction", "presence")
COMMON = ("name", "kind", "turn", "until", "description")
RESERVED_NAMES = ("run", "new", "results")  # path segments of the Tests page and the API
NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,79}$")
MAX_TURN = 2**31 - 1  # a PositiveIntegerField on PostgreSQL
MAX_POV = 20

# Text limits of the test's own fields (not stored play data: not declared in studio.limits).
DESCRIPTION = limits.Limit("memory_test.description", "text", max_chars=2000, label="description")
ACTION = limits.Limit("memory_test.action", "text", max_chars=2000, blank=False, label="action")
PHRASE = limits.Limit("memory_test.phrase", "text", max_chars=500, label="phrase")
NAME = limits.Limit("memory_test.character", "name", max_chars=200, label="name")
ENTRY = limits.Limit("memory_test.entry", "name", max_chars=120, label="entry id")


@dataclass(frozen=True)
class Field:
    """One field of a kind: its type (text | name | bool | choice | names), default, and the form's help."""

    name: str
    type: str
    label: str
    help: str = ""
    required: bool = False
    default: Any = None
    choices: tuple[str, ...] = ()
    limit: limits.Limit | None = None


KIND_FIELDS: dict[str, tuple[Field, ...]] = {
    KNOWS: (
        Field(
            "character",
            "name",
            "Character",
            "A character's name (a title, key or unique part of a title).",
            required=True,
            limit=NAME,
        ),
        Field("knows", "bool", "Knows", "true: the character knows it; false: does not.", default=True),
        Field("entry", "entry", "Lore Book entry", "The entry_id of a Lore Book entry (or give a fact).", limit=ENTRY),
        Field(
            "fact",
            "text",
            "Fact",
            "A phrase a fact's statement holds (case-insensitive; or give an entry).",
            limit=PHRASE,
        ),
    ),
    CONTEXT: (
        Field(
            "action",
            "text",
            "Player's action",
            "The action the narrator's prompt is built for.",
            required=True,
            limit=ACTION,
        ),
        Field(
            "entry",
            "entry",
            "Lore Book entry",
            "The entry_id the prompt must include or exclude.",
            required=True,
            limit=ENTRY,
        ),
        Field("includes", "bool", "Includes", "true: the prompt holds the entry; false: it does not.", default=True),
        Field(
            "pov",
            "names",
            "Point of view",
            "Characters whose point of view the memory carries (empty: those on scene).",
            default=(),
        ),
    ),
    BELIEF: (
        Field("subject", "name", "Subject", "Who or what the belief is about.", required=True, limit=NAME),
        Field(
            "statement",
            "text",
            "Statement holds",
            "A phrase the belief's statement holds (empty: any belief about the subject).",
            limit=PHRASE,
        ),
        Field(
            "trend",
            "choice",
            "Trend",
            "The belief's trend at the save's turn (any: whatever it is).",
            default="any",
            choices=TRENDS,
        ),
        Field(
            "holder",
            "name",
            "Held by",
            "Only beliefs this character holds (empty: any holder, the world's too).",
            limit=NAME,
        ),
        Field("exists", "bool", "Exists", "true: such a belief exists; false: none does.", default=True),
    ),
    NO_FINDINGS: (
        Field(
            "finding",
            "choice",
            "Finding kind",
            "The kind of continuity finding that must not be recorded.",
            default="any",
            choices=FINDING_KINDS,
        ),
    ),
}


class SpecError(ValueError):
    """A memory test that cannot be stored: `errors` maps each field to its messages."""

    def __init__(self, errors: dict[str, list[str]]):
        self.errors = errors
        super().__init__("; ".join(f"{name}: {' '.join(messages)}" for name, messages in errors.items()))


@dataclass(frozen=True)
class MemoryTestSpec:
    """One memory test, checked: the common fields and its kind's (`params`, defaults filled in)."""

    name: str
    kind: str
    turn: int = 0
    until: int | None = None
    description: str = ""
    params: dict[str, Any] = field(default_factory=dict)

    def as_dict(self, *, compact: bool = False) -> dict[str, Any]:
        """Return the flat record (the API's and the file's form). `compact`: leave out empty optional values."""
        data: dict[str, Any] = {"name": self.name, "kind": self.kind, "turn": self.turn}
        if self.until is not None or not compact:
            data["until"] = self.until
        if self.description or not compact:
            data["description"] = self.description
        for spec_field in KIND_FIELDS[self.kind]:
            value = self.params.get(spec_field.name)
            if compact and value in (None, "", [], ()):
                continue
            data[spec_field.name] = list(value) if isinstance(value, (list, tuple)) else value
        return data

    def applies_at(self, turn: int) -> bool:
        """Whether a save standing at `turn` is judged (`no_findings` from N on; the others from N to M)."""
        if turn < self.turn:
            return False
        return self.kind == NO_FINDINGS or self.until is None or turn <= self.until

    def sentence(self) -> str:
        """The test in words ("At or after turn 4, Mira knows the entry ledger")."""
        p = self.params
        when = (
            f"at turn {self.turn}"
            if self.until == self.turn
            else f"from turn {self.turn} to turn {self.until}"
            if self.until is not None
            else f"at or after turn {self.turn}"
        )
        if self.kind == KNOWS:
            what = f"the entry “{p['entry']}”" if p.get("entry") else f"a fact holding “{p['fact']}”"
            return f"{when.capitalize()}, {p['character']} {'knows' if p['knows'] else 'does not know'} {what}."
        if self.kind == CONTEXT:
            pov = f" (point of view: {', '.join(p['pov'])})" if p.get("pov") else ""
            verb = "includes" if p["includes"] else "excludes"
            return (
                f"{when.capitalize()}, the narrator's prompt for “{p['action']}”{pov} {verb} the entry “{p['entry']}”."
            )
        if self.kind == BELIEF:
            holding = f" holding “{p['statement']}”" if p.get("statement") else ""
            held = f", held by {p['holder']}," if p.get("holder") else ""
            trend = "" if p["trend"] == "any" else f" with the trend {p['trend']}"
            verb = "exists" if p["exists"] else "does not exist"
            return f"{when.capitalize()}, a belief about {p['subject']}{holding}{held}{trend} {verb}."
        span = f"turns {self.turn} to {self.until}" if self.until is not None else f"turns {self.turn} on"
        kind = "" if p["finding"] == "any" else f" of kind {p['finding']}"
        return f"No continuity finding{kind} in {span}."


def _integer(value: Any, name: str, errors: dict, *, nullable: bool) -> int | None:
    if value is None and nullable:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        errors.setdefault(name, []).append("must be a whole number.")
        return None
    if not 0 <= value <= MAX_TURN:
        errors.setdefault(name, []).append(f"must be from 0 to {MAX_TURN}.")
        return None
    return value


def _value(spec_field: Field, value: Any, errors: dict) -> Any:
    """Return the field's value checked (None when absent), or record what is wrong."""
    name = spec_field.name
    if spec_field.type == "bool":
        if not isinstance(value, bool):
            errors.setdefault(name, []).append("must be true or false.")
        return value
    if spec_field.type == "choice":
        if value not in spec_field.choices:
            errors.setdefault(name, []).append(f"must be one of: {', '.join(spec_field.choices)}.")
        return value
    if spec_field.type == "names":
        if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
            errors.setdefault(name, []).append("must be a list of names.")
            return ()
        names = [" ".join(v.split()) for v in value if v.strip()]
        if len(names) > MAX_POV:
            errors.setdefault(name, []).append(f"at most {MAX_POV} names.")
        for item in names:
            problem = NAME.problem(item)
            if problem:
                errors.setdefault(name, []).append(f"“{item[:40]}” {problem}")
        return tuple(names)
    problem = spec_field.limit.problem(value) if spec_field.limit else ""
    if problem:
        errors.setdefault(name, []).append(f"The {spec_field.limit.label} {problem}")
        return value
    value = value.strip()
    if spec_field.type == "entry" and value and not re.match(r"^[-a-zA-Z0-9_]+$", value):
        errors.setdefault(name, []).append("must be an entry_id (letters, digits, - and _).")
    return value


def parse_spec(data: Mapping[str, Any]) -> MemoryTestSpec:
    """Return the checked test for the flat record `data`; raise SpecError naming every wrong field.

    Absent optional fields take their defaults; a field the kind does not have is an error (a
    typo never passes silently), as is a value of the wrong type (`true` is not "true").
    """
    errors: dict[str, list[str]] = {}
    if not isinstance(data, Mapping):
        raise SpecError({"(test)": ["must be a table of fields."]})
    name = data.get("name")
    if not isinstance(name, str) or not NAME_RE.match(name):
        errors["name"] = ["must be a slug: letters, digits, - and _, starting with a letter or digit, at most 80."]
    elif name in RESERVED_NAMES:
        errors["name"] = [f"“{name}” is kept for the pages and the API; choose another name."]
    kind = data.get("kind")
    if kind not in KINDS:
        errors["kind"] = [f"must be one of: {', '.join(KINDS)}."]
        raise SpecError(errors)
    turn = _integer(data.get("turn", 0), "turn", errors, nullable=False)
    until = _integer(data.get("until"), "until", errors, nullable=True)
    if turn is not None and until is not None and until < turn:
        errors.setdefault("until", []).append(f"must be at least turn ({turn}).")
    description = data.get("description", "")
    problem = DESCRIPTION.problem(description if description is not None else "")
    if problem:
        errors.setdefault("description", []).append(f"The description {problem}")
    fields = KIND_FIELDS[kind]
    known = set(COMMON) | {f.name for f in fields}
    for unknown in sorted(set(data) - known, key=str):
        errors.setdefault(str(unknown), []).append(f"is not a field of a “{kind}” test.")
    params: dict[str, Any] = {}
    for spec_field in fields:
        value = data.get(spec_field.name)
        if value is None or (
            spec_field.type in ("text", "name", "entry") and isinstance(value, str) and not value.strip()
        ):
            if spec_field.required:
                errors.setdefault(spec_field.name, []).append("is required.")
            params[spec_field.name] = spec_field.default if spec_field.default is not None else ""
            continue
        params[spec_field.name] = _value(spec_field, value, errors)
    if kind == KNOWS and not errors.get("entry") and not errors.get("fact"):
        if bool(params.get("entry")) == bool(params.get("fact")):
            errors.setdefault("entry", []).append("give an entry or a fact, one of the two.")
    if errors:
        raise SpecError(errors)
    return MemoryTestSpec(
        name=name, kind=kind, turn=turn, until=until, description=(description or "").strip(), params=params
    )


def spec_from_form(data: Mapping[str, str], *, kind: str) -> dict[str, Any]:
    """Return the flat record of a form's strings (a QueryDict or dict): types as `parse_spec` wants them.

    Only the common fields and the kind's are read; an empty number is absent; a bool is
    "true" / "false"; the point of view is a comma-separated list.
    """
    record: dict[str, Any] = {"kind": kind}
    for name in ("name", "description"):
        if name in data:
            record[name] = data.get(name, "")
    for name in ("turn", "until"):
        raw = (data.get(name) or "").strip()
        if raw:
            record[name] = int(raw) if re.fullmatch(r"\d{1,10}", raw) else raw
    for spec_field in KIND_FIELDS.get(kind, ()):
        raw = data.get(spec_field.name)
        if raw is None:
            continue
        if spec_field.type == "bool":
            record[spec_field.name] = {"true": True, "false": False}.get(raw.strip().lower(), raw)
        elif spec_field.type == "names":
            record[spec_field.name] = [part.strip() for part in raw.split(",") if part.strip()]
        else:
            record[spec_field.name] = raw
    return record

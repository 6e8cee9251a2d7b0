"""Import and export of universes and Lore Books.

- `toml_io`: Universe-as-Code, one TOML file per universe (the studio's own format): export
  and diff, the document in `toml_document`, the reading in `toml_parse`.
- `character_card`: Character Card V1/V2/V3 (JSON, or PNG with a `chara` / `ccv3` text
  chunk): its `character_book`, and (`card_fields`) the card's own fields, its V1 mirror and
  its portrait; `card_export` writes them.
- `sillytavern`: SillyTavern world-info JSON.

Parsers only read: they turn bytes into `IncomingEntry` lists (or a `UniverseDocument`) and
raise `ImportFormatError` with a message naming where the problem is. Writing happens in
`studio.universes.services`, in one transaction, so a bad file changes nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# Limits shared by every importer: anything bigger is refused before parsing.
MAX_IMPORT_BYTES = 8 * 1024 * 1024
MAX_ENTRIES = 20_000
MAX_TITLE_CHARS = 300
MAX_TEXT_CHARS = 200_000
MAX_KEYS = 200
MAX_KEY_CHARS = 500
# How deeply a file's arrays and tables (objects) may nest; deeper ones would exhaust the
# parser's stack (a RecursionError) or anything walking the value after it.
MAX_NESTING = 64

# Where each tool's unused fields are kept inside LoreEntry.extensions.
AXIOM_EXTENSION = "axiom"
KNOWN_BY_ABSENT = "absent"


def known_by_from_extension(axiom: dict) -> Any:
    """Return `known_by` from an entry's `extensions.axiom` (KNOWN_BY_ABSENT when missing or malformed).

    None = everyone, [] = nobody but the narrator, a list of names = those. Other tools keep
    the `axiom` object as they found it and ignore it.
    """
    if "known_by" not in axiom:
        return KNOWN_BY_ABSENT
    value = axiom["known_by"]
    if value is None:
        return None
    if isinstance(value, list) and all(isinstance(v, str) for v in value) and len(value) <= 100:
        return [v for v in value if v.strip()]
    return KNOWN_BY_ABSENT


# The decorator lines (`@@...`) that stood before an imported entry's content.
DECORATOR_EXTENSION = "decorators"


class ImportFormatError(ValueError):
    """The file cannot be imported; the message says where and why."""


@dataclass
class IncomingEntry:
    """One lore entry read from a file, before it is matched against the Lore Book."""

    label: str  # how the report names it, e.g. "entry uid 3"
    title: str
    text: str
    keys: list[str] = field(default_factory=list)
    entry_id: str = ""  # the studio id when the file carries one
    kind: str = ""  # "" = keep the existing kind / use the import's default
    links: list[str] | None = None  # entry ids; None = leave links alone
    extensions: dict[str, Any] = field(default_factory=dict)  # merged into entry.extensions
    identity: tuple[str, str, Any] | None = None  # (extension, field, value) to re-match
    skip_reason: str = ""  # set by the parser for entries it will not import
    activation: dict[str, Any] = field(default_factory=dict)  # activation columns (activation.py)
    acting: list[str] = field(default_factory=list)  # file fields / decorators the studio acts on
    kept: list[str] = field(default_factory=list)  # file fields / decorators only kept for re-export
    warnings: list[str] = field(default_factory=list)  # what will behave differently than in the tool
    # Who knows the entry (`extensions.axiom.known_by`): KNOWN_BY_ABSENT = the file does not say.
    known_by: Any = "absent"


@dataclass
class IncomingBook:
    """What a lore file holds: entries plus file-level fields kept in Universe_Meta."""

    source: str
    entries: list[IncomingEntry]
    meta: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    # Book-wide activation settings the file carries (e.g. CCv3 scan_depth), as Universe_Meta
    # lore_* values; applied where the universe has not set its own.
    defaults: dict[str, str] = field(default_factory=dict)
    # A Character Card's own fields (card_fields.card_record) when the file is a card, and the
    # PNG file it came in (kept as the portrait).
    card: dict[str, Any] | None = None
    portrait: bytes | None = None


def check_size(data: bytes, *, what: str = "file") -> None:
    if len(data) > MAX_IMPORT_BYTES:
        raise ImportFormatError(f"The {what} is {len(data):,} bytes; the limit is {MAX_IMPORT_BYTES:,} bytes.")
    if not data:
        raise ImportFormatError(f"The {what} is empty.")


def require_text(value: Any, where: str, *, limit: int = MAX_TEXT_CHARS, allow_empty: bool = True) -> str:
    if value is None:
        value = ""
    if not isinstance(value, str):
        raise ImportFormatError(f"{where}: expected text, got {type(value).__name__}.")
    if len(value) > limit:
        raise ImportFormatError(f"{where}: {len(value):,} characters; the limit is {limit:,}.")
    if not allow_empty and not value.strip():
        raise ImportFormatError(f"{where}: must not be empty.")
    return value


def require_string_list(value: Any, where: str) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise ImportFormatError(f"{where}: expected a list of strings, got {type(value).__name__}.")
    if len(value) > MAX_KEYS:
        raise ImportFormatError(f"{where}: {len(value)} items; the limit is {MAX_KEYS}.")
    result = []
    for index, item in enumerate(value):
        if not isinstance(item, str):
            raise ImportFormatError(f"{where}[{index}]: expected a string, got {type(item).__name__}.")
        if len(item) > MAX_KEY_CHARS:
            raise ImportFormatError(f"{where}[{index}]: longer than {MAX_KEY_CHARS} characters.")
        result.append(item)
    return result


def nesting_error(where: str = "The file") -> ImportFormatError:
    return ImportFormatError(f"{where}: arrays and tables nest more than {MAX_NESTING} levels deep.")


def reject_deep(value: Any, where: str = "The file") -> None:
    """Refuse containers nested more than MAX_NESTING levels (the document itself is level 1)."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, (dict, list)):
            if depth > MAX_NESTING:
                raise nesting_error(where)
            stack.extend((child, depth + 1) for child in (item.values() if isinstance(item, dict) else item))


def reject_nul(value: Any, where: str = "the file") -> None:
    """Refuse NUL characters anywhere: PostgreSQL can store them neither in text nor in JSON."""
    stack = [(value, where)]
    while stack:
        item, path = stack.pop()
        if isinstance(item, str):
            if "\x00" in item:
                raise ImportFormatError(f"{path}: contains a NUL character (\\u0000), which cannot be stored.")
        elif isinstance(item, dict):
            for key, child in item.items():
                if isinstance(key, str) and "\x00" in key:
                    raise ImportFormatError(f"{path}: a field name contains a NUL character.")
                stack.append((child, f"{path}.{key}"))
        elif isinstance(item, list):
            stack.extend((child, f"{path}[{index}]") for index, child in enumerate(item))

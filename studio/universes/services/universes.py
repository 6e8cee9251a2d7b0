"""Writes for universes themselves: create, rename, delete, Universe_Meta and missions."""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterable, Mapping
from typing import Any

from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils.text import slugify

from studio.memory.chapters.selectors import (
    CHAPTERS_PER_ARC_META,
    MIN_TURNS_META,
    SCENE_CHANGE_META,
    TURNS_PER_CHAPTER_META,
)
from studio.memory.lore_activation import (
    MAX_SCAN_DEPTH,
    META_CASE_SENSITIVE,
    META_MATCH_WHOLE_WORDS,
    META_RECURSION_DEPTH,
    META_SCAN_DEPTH,
    META_TOKEN_BUDGET,
)
from studio import limits
from studio.memory.recall.macros import (
    CHARACTER_CARD_META,
    PLAYER_CHARACTER_META,
    PLAYER_DESCRIPTION_META,
    PLAYER_PORTRAIT_META,
)
from studio.memory.continuity.settings import guard_knob_validate
from studio.memory.recall.policy import knob_validate
from studio.memory.missions import parse_missions_text
from studio.world.models import Universe, UniverseMeta
from studio.universes.opening import ALTERNATE_GREETINGS_META
from studio.universes.services.persona import persona_meta_validate

logger = logging.getLogger(__name__)

BELIEF_MISSION = "belief_mission"
BELIEF_MISSIONS = "belief_missions"
# File-level fields of imported character cards / world-info files, kept for re-export.
CHARACTER_BOOK_META = "character_book"
SILLYTAVERN_META = "sillytavern_world"
JSON_OBJECT_META_KEYS = {CHARACTER_CARD_META, CHARACTER_BOOK_META, SILLYTAVERN_META}
PERSONA_META_KEYS = {PLAYER_CHARACTER_META, PLAYER_DESCRIPTION_META, PLAYER_PORTRAIT_META}
# What a new universe starts with (an existing one keeps what it has). Nothing: lore recursion
# stays at the engine's default (3 passes), on, as SillyTavern ships it (`world_info_recursive:
# true` in its default settings.json); the Console's lore line shows what recursion pulled in.
NEW_UNIVERSE_META: dict[str, str] = {}

# Book-wide lore activation defaults: the keys are the engine's (lore_activation/spec.py).
LORE_INT_META = {
    META_SCAN_DEPTH: (0, MAX_SCAN_DEPTH, "messages scanned for keys; the pending input is 1, a turn is 2"),
    META_TOKEN_BUDGET: (0, 1_000_000, "tokens the activated entries may use; 0 = no budget"),
    META_RECURSION_DEPTH: (0, 100, "recursion passes after the first scan; 0 = no recursion"),
}
LORE_BOOL_META = {META_CASE_SENSITIVE, META_MATCH_WHOLE_WORDS}
# The memory context's knobs (budget, shares, reserve, cap, point of view, proxy placement) are checked by
# their one declaration, `studio.memory.recall.policy.KNOBS` (`knob_validate` in `meta_validate`).
# How chapters close (studio.memory.chapters.selectors.chapter_settings reads them).
LORE_INT_META.update(
    {
        TURNS_PER_CHAPTER_META: (0, 10_000, "turns a chapter holds before it closes; 0 = no limit"),
        CHAPTERS_PER_ARC_META: (0, 10_000, "chapters rolled up into an arc; 0 = no arcs"),
        MIN_TURNS_META: (0, 10_000, "turns a chapter holds before a scene change may close it"),
    }
)
LORE_BOOL_META.add(SCENE_CHANGE_META)

# Entry ids that would collide with the Lore Book's own URLs (/lore/new/, /lore/bulk/, ...).
RESERVED_ENTRY_IDS = {"new", "bulk", "status", "deleted", "tester", "health"}
RESERVED_UNIVERSE_SLUGS = {"new", "import"}

SLUG_RE = re.compile(r"^[-a-zA-Z0-9_]{1,120}$")
META_KEY_RE = re.compile(r"^[A-Za-z0-9_.\-]{1,200}$")
MAX_MISSION_CHARS = 4000
MAX_META_VALUE_CHARS = 1_000_000


# --- Universes ----------------------------------------------------------------------------


def _unique_slug(base: str, taken: Iterable[str], *, max_length: int) -> str:
    base = (base or "item")[:max_length].strip("-") or "item"
    taken = set(taken)
    candidate, n = base, 2
    while candidate in taken:
        suffix = f"-{n}"
        candidate = f"{base[: max_length - len(suffix)]}{suffix}"
        n += 1
    return candidate


def universe_create(*, user, name: str, slug: str = "", description: str = "") -> Universe:
    """Create a universe owned by `user` with `NEW_UNIVERSE_META`; derive a free slug from the name when none is given."""
    name = name.strip()
    if not name:
        raise ValidationError({"name": "Give the universe a name."})
    if slug in RESERVED_UNIVERSE_SLUGS:
        raise ValidationError({"slug": f"“{slug}” is reserved; choose another slug."})
    if slug:
        if Universe.objects.filter(slug=slug).exists():
            raise ValidationError({"slug": f"The slug “{slug}” is taken; choose another."})
    else:
        base = slugify(name)[:80] or "universe"
        taken = set(Universe.objects.filter(slug__startswith=base).values_list("slug", flat=True))
        slug = _unique_slug(base, taken | RESERVED_UNIVERSE_SLUGS, max_length=80)
    with transaction.atomic():
        universe = Universe.objects.create(name=name, slug=slug, description=description, owner=user)
        UniverseMeta.objects.bulk_create(
            UniverseMeta(universe=universe, key=key, value=value) for key, value in NEW_UNIVERSE_META.items()
        )
    return universe


def universe_rename(*, universe: Universe, name: str, description: str | None = None) -> Universe:
    """Change a universe's display name (and description); its slug, and so its URLs, stay."""
    name = name.strip()
    if not name:
        raise ValidationError({"name": "The name must not be empty."})
    universe.name = name
    fields = ["name", "updated_at"]
    if description is not None:
        universe.description = description
        fields.append("description")
    universe.save(update_fields=fields)
    return universe


def _delete_vector_chunks(scope_ids: list[str]) -> None:
    try:
        from studio.memory.vector import get_vector_memory

        memory = get_vector_memory()
        for scope_id in scope_ids:
            memory.rollback(scope_id, -1)
    except Exception:
        logger.warning("Could not delete vector chunks for %s", scope_ids, exc_info=True)


@transaction.atomic
def universe_delete(*, universe: Universe) -> None:
    """Delete a universe with its meta, Lore Book, revisions and saves; then its vectors."""
    scope_ids = [universe.lore_scope_id, *universe.saves.values_list("save_id", flat=True)]
    universe.delete()
    transaction.on_commit(lambda: _delete_vector_chunks(scope_ids))


# --- Universe_Meta ------------------------------------------------------------------------


def meta_validate(*, key: str, value: str) -> str:
    """Return the value to store for `key`, or raise ValidationError saying what is wrong.

    Known keys are checked: `belief_mission` is one piece of text; `belief_missions` is a
    JSON object of character name -> mission text; the interchange keys are JSON objects.
    """
    if not META_KEY_RE.match(key or ""):
        raise ValidationError({"key": "Use 1-200 letters, digits, dots, dashes or underscores for the key."})
    if not isinstance(value, str):
        raise ValidationError({"value": "The value must be text."})
    if len(value) > MAX_META_VALUE_CHARS:
        raise ValidationError({"value": f"The value is longer than {MAX_META_VALUE_CHARS:,} characters."})
    if key in PERSONA_META_KEYS:
        return persona_meta_validate(key=key, value=value)  # the persona form's rules (services/persona.py)
    if key == BELIEF_MISSION:
        value = value.strip()
        if len(value) > MAX_MISSION_CHARS:
            raise ValidationError(
                {"value": f"belief_mission is one mission of at most {MAX_MISSION_CHARS} characters."}
            )
        return value
    if key == BELIEF_MISSIONS:
        missions = missions_validate(_loads_json_object(value, key))
        return json.dumps(missions, ensure_ascii=False)
    if key in JSON_OBJECT_META_KEYS:
        _loads_json_object(value, key)
    if key == ALTERNATE_GREETINGS_META:
        try:
            greetings = json.loads(value)
        except json.JSONDecodeError as exc:
            raise ValidationError(
                {"value": f"{key} is a JSON array of greetings: {exc.msg} (line {exc.lineno})."}
            ) from None
        if not isinstance(greetings, list) or not all(isinstance(g, str) for g in greetings):
            raise ValidationError({"value": f'{key} is a JSON array of strings, e.g. ["The door opens.", "Rain."].'})
    try:
        knob_value = knob_validate(key, value)
        if knob_value is None:
            knob_value = guard_knob_validate(key, value)  # the continuity guard's knobs (docs/continuity.md)
    except ValueError as exc:
        raise ValidationError({"value": str(exc)}) from None
    if knob_value is not None:
        return knob_value
    if key in LORE_INT_META:
        low, high, meaning = LORE_INT_META[key]
        try:
            number = int(value.strip())
        except ValueError:
            raise ValidationError({"value": f"{key} is a whole number ({meaning}), not “{value.strip()}”."}) from None
        if not low <= number <= high:
            raise ValidationError({"value": f"{key} must be between {low} and {high} ({meaning})."})
        return str(number)
    if key in LORE_BOOL_META:
        flag = value.strip().lower()
        if flag not in ("true", "false"):
            raise ValidationError({"value": f"{key} is true or false, not “{value.strip()}”."})
        return flag
    return value


def _loads_json_object(value: str, key: str) -> dict:
    try:
        data = json.loads(value, **limits.strict_json_hooks())
    except json.JSONDecodeError as exc:
        raise ValidationError(
            {"value": f"{key} must be JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}."}
        ) from exc
    except ValueError as exc:  # a key twice in one object, NaN / Infinity
        raise ValidationError({"value": f"{key} must be JSON: {exc}."}) from exc
    if not isinstance(data, dict):
        raise ValidationError(
            {"value": f'{key} must be a JSON object like {{"Name": "mission"}}, not {type(data).__name__}.'}
        )
    return data


def missions_validate(missions: Mapping[str, Any] | Iterable[tuple[Any, Any]]) -> dict[str, str]:
    """Return per-character missions cleaned, or raise ValidationError listing every problem.

    `missions` is a mapping (the `belief_missions` JSON object) or (name, mission) rows (the
    Missions page's table, whose rows blank on both sides are skipped). A name is text without
    a colon or line break, given once; a mission is text of at most MAX_MISSION_CHARS, its
    whitespace collapsed. This is the one check: the meta editor, the Missions page's table
    and text block, and imports all come through it.
    """
    if isinstance(missions, Mapping):
        rows = list(missions.items())
    else:
        rows = [(name, mission) for name, mission in missions if not (_blank(name) and _blank(mission))]
    clean: dict[str, str] = {}
    errors = []
    for name, mission in rows:
        if not isinstance(name, str) or not name.strip():
            if isinstance(mission, str) and mission.strip():
                errors.append(f"A mission has no character name: “{' '.join(mission.split())[:60]}”.")
            else:
                errors.append("A character name is empty.")
            continue
        stripped = name.strip()
        if ":" in stripped or "\n" in stripped or "\r" in stripped:
            errors.append(f"“{stripped}”: a name may not contain a colon or a line break.")
            continue
        if not isinstance(mission, str):
            errors.append(f"“{stripped}”: the mission must be text, not {type(mission).__name__}.")
            continue
        mission = " ".join(mission.split())
        if not mission:
            errors.append(f"“{stripped}”: the mission is empty.")
            continue
        if len(mission) > MAX_MISSION_CHARS:
            errors.append(f"“{stripped}”: the mission is longer than {MAX_MISSION_CHARS} characters.")
            continue
        if stripped in clean:
            errors.append(f"“{stripped}” appears twice.")
            continue
        clean[stripped] = mission
    if errors:
        raise ValidationError({"value": errors})
    return clean


def _blank(value: Any) -> bool:
    return isinstance(value, str) and not value.strip()


def missions_from_text(text: str) -> tuple[dict[str, str], list[str]]:
    """Read a "Name: mission" block: return the missions and the non-blank lines that hold none.

    The engine's `parse_missions_text` is the one reading of the block; a line it reads
    nothing from (no colon, an empty name or mission) is returned so the page can say so.
    """
    ignored = [line.strip() for line in (text or "").splitlines() if line.strip() and not parse_missions_text(line)]
    return parse_missions_text(text or ""), ignored


def meta_set(*, universe: Universe, key: str, value: str) -> UniverseMeta:
    """Create or update one Universe_Meta row after validating it."""
    value = meta_validate(key=key, value=value)
    row, _ = UniverseMeta.objects.update_or_create(universe=universe, key=key, defaults={"value": value})
    return row


def meta_delete(*, universe: Universe, key: str) -> int:
    deleted, _ = UniverseMeta.objects.filter(universe=universe, key=key).delete()
    return deleted


def missions_set(
    *,
    universe: Universe,
    universe_mission: str | None = None,
    missions: Mapping[str, str] | Iterable[tuple[str, str]] | None = None,
) -> dict[str, str] | None:
    """Store the universe-wide mission and/or the per-character missions (None = unchanged).

    `missions` is a mapping or (name, mission) rows (`missions_validate`). Return the
    per-character missions as stored (None when not given); raise ValidationError, storing
    nothing, when either part is not valid.
    """
    stored = None
    with transaction.atomic():
        if universe_mission is not None:
            if universe_mission.strip():
                meta_set(universe=universe, key=BELIEF_MISSION, value=universe_mission)
            else:
                meta_delete(universe=universe, key=BELIEF_MISSION)
        if missions is not None:
            stored = missions_validate(missions)
            meta_set(universe=universe, key=BELIEF_MISSIONS, value=json.dumps(stored, ensure_ascii=False))
    return stored

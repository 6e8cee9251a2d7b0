"""Writes for universes: universes, Universe_Meta, the Lore Book, missions and imports.

Every function that touches more than one row runs in one `transaction.atomic()` block.
Work outside the database (queueing the lore embedding job, deleting vector chunks) is
scheduled with `transaction.on_commit`, so a rolled-back write leaves nothing behind.
Every change to a lore entry records a `LoreRevision` (who, when, before, after).
"""
from __future__ import annotations

import functools
import json
import logging
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone
from django.utils.text import slugify

from studio.memory.lore_state import lore_embedding_state_set
from studio.universes.activation import activation_validate, activation_values, invalid_regex_keys
from studio.universes.counting import text_counts, text_counts_many
from studio.universes.interchange import IncomingBook, IncomingEntry
from studio.universes.selectors import with_link_ids
from studio.universes.models import (
    EmbeddingState,
    LoreEntry,
    LoreKind,
    LoreRevision,
    Universe,
    UniverseMeta,
)

logger = logging.getLogger(__name__)

BELIEF_MISSION = "belief_mission"
BELIEF_MISSIONS = "belief_missions"
# File-level fields of imported character cards / world-info files, kept for re-export.
CHARACTER_CARD_META = "character_card"
CHARACTER_BOOK_META = "character_book"
SILLYTAVERN_META = "sillytavern_world"
JSON_OBJECT_META_KEYS = {CHARACTER_CARD_META, CHARACTER_BOOK_META, SILLYTAVERN_META}

# Book-wide lore activation defaults (studio.memory.lore_activation.defaults_from_meta).
LORE_INT_META = {
    "lore_scan_depth": (0, 1000, "messages scanned for keys; the pending input is 1, a turn is 2"),
    "lore_token_budget": (0, 1_000_000, "tokens the activated entries may use; 0 = no budget"),
    "lore_recursion_depth": (0, 100, "recursion passes after the first scan; 0 = no recursion"),
}
LORE_BOOL_META = {"lore_case_sensitive", "lore_match_whole_words"}

# Entry ids that would collide with the Lore Book's own URLs (/lore/new/, /lore/bulk/, ...).
RESERVED_ENTRY_IDS = {"new", "bulk", "status", "deleted"}
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
    """Create a universe owned by `user`; derive a free slug from the name when none is given."""
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
    return Universe.objects.create(name=name, slug=slug, description=description, owner=user)


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
        raise ValidationError(
            {"key": "Use 1-200 letters, digits, dots, dashes or underscores for the key."}
        )
    if not isinstance(value, str):
        raise ValidationError({"value": "The value must be text."})
    if len(value) > MAX_META_VALUE_CHARS:
        raise ValidationError({"value": f"The value is longer than {MAX_META_VALUE_CHARS:,} characters."})
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
        data = json.loads(value)
    except json.JSONDecodeError as exc:
        raise ValidationError(
            {"value": f"{key} must be JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}."}
        ) from exc
    if not isinstance(data, dict):
        raise ValidationError(
            {"value": f"{key} must be a JSON object like {{\"Name\": \"mission\"}}, not {type(data).__name__}."}
        )
    return data


def missions_validate(missions: dict[str, Any]) -> dict[str, str]:
    """Check per-character missions: names without colons or line breaks, text missions."""
    clean: dict[str, str] = {}
    errors = []
    for name, mission in missions.items():
        if not isinstance(name, str) or not name.strip():
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


def meta_set(*, universe: Universe, key: str, value: str) -> UniverseMeta:
    """Create or update one Universe_Meta row after validating it."""
    value = meta_validate(key=key, value=value)
    row, _ = UniverseMeta.objects.update_or_create(
        universe=universe, key=key, defaults={"value": value}
    )
    return row


def meta_delete(*, universe: Universe, key: str) -> int:
    deleted, _ = UniverseMeta.objects.filter(universe=universe, key=key).delete()
    return deleted


def missions_set(
    *, universe: Universe, universe_mission: str | None = None, missions: dict[str, str] | None = None
) -> None:
    """Store the universe-wide mission and/or the per-character missions (None = unchanged)."""
    with transaction.atomic():
        if universe_mission is not None:
            if universe_mission.strip():
                meta_set(universe=universe, key=BELIEF_MISSION, value=universe_mission)
            else:
                meta_delete(universe=universe, key=BELIEF_MISSION)
        if missions is not None:
            meta_set(
                universe=universe,
                key=BELIEF_MISSIONS,
                value=json.dumps(missions_validate(missions), ensure_ascii=False),
            )


# --- Lore Book ----------------------------------------------------------------------------


def lore_entry_snapshot(entry: LoreEntry, *, links: Sequence[str] | None = None) -> dict[str, Any]:
    """Return the state a revision keeps: every field an author can change."""
    if links is None:
        links = [link.entry_id for link in entry.links.all()]
    return {
        "entry_id": entry.entry_id,
        "title": entry.title,
        "kind": entry.kind,
        "text": entry.text,
        "keys": list(entry.keys or []),
        "links": sorted(links),
        "extensions": entry.extensions or {},
        **activation_values(entry),
    }


def _record(
    *, universe: Universe, entry: LoreEntry | None, entry_id: str, user, action: str,
    before: dict | None, after: dict | None,
) -> LoreRevision:
    return LoreRevision(
        universe=universe,
        lore_entry=entry,
        entry_id=entry_id,
        action=action,
        before=before,
        after=after,
        author=user if getattr(user, "is_authenticated", False) else None,
    )


def _sync_lore_now(universe_pk: int) -> None:
    """Queue the embedding job; if it cannot be queued, say so on the pending entries."""
    universe = Universe.objects.filter(pk=universe_pk).first()
    if universe is None:
        return
    try:
        from studio.memory.jobs import enqueue_sync_lore

        enqueue_sync_lore(universe=universe)
    except Exception as exc:  # the entries must not look "pending" forever
        logger.exception("Could not queue sync_lore for universe %s", universe_pk)
        lore_embedding_state_set(
            LoreEntry.objects.filter(universe_id=universe_pk, embedding_state=EmbeddingState.PENDING),
            state=EmbeddingState.FAILED,
            error=f"The embedding job could not be queued: {exc}",
        )


def schedule_lore_sync(*, universe: Universe) -> None:
    """Queue `sync_lore` for the universe once the current transaction commits (once per commit)."""
    connection = transaction.get_connection()
    if connection.in_atomic_block:
        for _savepoints, func, *_rest in connection.run_on_commit:
            if getattr(func, "lore_sync_universe", None) == universe.pk:
                return
    callback = functools.partial(_sync_lore_now, universe.pk)
    callback.lore_sync_universe = universe.pk
    transaction.on_commit(callback)


def lore_entry_id_for(*, universe: Universe, title: str, taken: set[str] | None = None) -> str:
    base = slugify(title)[:120] or "entry"
    if taken is None:
        taken = set(
            universe.lore_entries.filter(entry_id__startswith=base).values_list("entry_id", flat=True)
        )
    return _unique_slug(base, set(taken) | RESERVED_ENTRY_IDS, max_length=120)


def _clean_keys(keys: Iterable[str]) -> list[str]:
    seen, result = set(), []
    for key in keys:
        key = key.strip()
        if key and key not in seen:
            seen.add(key)
            result.append(key)
    return result


def _apply_activation(entry: LoreEntry, values: dict[str, Any]) -> None:
    for name, value in values.items():
        setattr(entry, name, value)


def _validate_entry_fields(*, title: str, kind: str) -> None:
    errors = {}
    if not title.strip():
        errors["title"] = "Give the entry a title."
    if kind not in LoreKind.values:
        errors["kind"] = f"Unknown kind “{kind}”; use one of {', '.join(LoreKind.values)}."
    if errors:
        raise ValidationError(errors)


def _apply_counts(entry: LoreEntry) -> None:
    entry.word_count, entry.token_count = text_counts(entry.text)


@transaction.atomic
def lore_entry_create(
    *,
    universe: Universe,
    user,
    title: str,
    kind: str = LoreKind.CONCEPT,
    text: str = "",
    keys: Sequence[str] = (),
    links: Sequence[LoreEntry] = (),
    entry_id: str = "",
    extensions: dict[str, Any] | None = None,
    activation: dict[str, Any] | None = None,
    strict_keys: bool = True,
    action: str = LoreRevision.Action.CREATE,
) -> LoreEntry:
    """Create a lore entry, record its revision and queue its embedding.

    `activation` holds activation fields (studio defaults for the rest: see activation.py);
    with `strict_keys` a regex key that does not compile is refused, naming the key.
    """
    _validate_entry_fields(title=title, kind=kind)
    keys = _clean_keys(keys)
    activation = activation_validate(activation or {}, strict_keys=strict_keys, primary_keys=keys)
    if entry_id in RESERVED_ENTRY_IDS:
        raise ValidationError({"entry_id": f"“{entry_id}” is reserved by the Lore Book's pages; choose another id."})
    if entry_id:
        if universe.lore_entries.filter(entry_id=entry_id).exists():
            raise ValidationError({"entry_id": f"The id “{entry_id}” is already used in this Lore Book."})
    else:
        entry_id = lore_entry_id_for(universe=universe, title=title)
    entry = LoreEntry(
        universe=universe,
        entry_id=entry_id,
        title=title.strip(),
        kind=kind,
        text=text,
        keys=keys,
        extensions=extensions or {},
    )
    lore_embedding_state_set(entry, state=EmbeddingState.PENDING)
    _apply_activation(entry, activation)
    _apply_counts(entry)
    entry.full_clean(exclude=["links"])
    entry.save()
    if links:
        entry.links.set([link for link in links if link.universe_id == universe.pk and link.pk != entry.pk])
    _record(
        universe=universe, entry=entry, entry_id=entry.entry_id, user=user, action=action,
        before=None, after=lore_entry_snapshot(entry),
    ).save()
    schedule_lore_sync(universe=universe)
    return entry


@transaction.atomic
def lore_entry_update(
    *,
    entry: LoreEntry,
    user,
    title: str | None = None,
    kind: str | None = None,
    text: str | None = None,
    keys: Sequence[str] | None = None,
    links: Sequence[LoreEntry] | None = None,
    extensions: dict[str, Any] | None = None,
    activation: dict[str, Any] | None = None,
    strict_keys: bool = True,
    action: str = LoreRevision.Action.UPDATE,
) -> list[str]:
    """Apply the given changes (None = unchanged); record a revision. Return the changed fields.

    `activation` changes only the activation fields it names; keys are checked as in create.
    """
    before = lore_entry_snapshot(entry)
    clean_keys = _clean_keys(keys) if keys is not None else None
    activation = activation_validate(activation or {}, strict_keys=strict_keys,
                                     primary_keys=clean_keys if clean_keys is not None else [])
    new_title = before["title"] if title is None else title.strip()
    new_kind = before["kind"] if kind is None else kind
    _validate_entry_fields(title=new_title, kind=new_kind)
    entry.title, entry.kind = new_title, new_kind
    if text is not None:
        entry.text = text
    if clean_keys is not None:
        entry.keys = clean_keys
    if extensions is not None:
        entry.extensions = extensions
    _apply_activation(entry, activation)
    link_ids = before["links"]
    if links is not None:
        links = [link for link in links if link.universe_id == entry.universe_id and link.pk != entry.pk]
        link_ids = sorted(link.entry_id for link in links)
    after = lore_entry_snapshot(entry, links=link_ids)
    changed_fields = [name for name in after if after[name] != before[name]]
    if not changed_fields:
        return []
    content_changed = any(before[f] != after[f] for f in ("title", "text", "keys"))
    if content_changed:
        lore_embedding_state_set(entry, state=EmbeddingState.PENDING)
    if before["text"] != after["text"] or entry.word_count is None:
        _apply_counts(entry)
    entry.full_clean(exclude=["links"])
    entry.save()
    if links is not None and link_ids != before["links"]:
        entry.links.set(links)
    _record(
        universe=entry.universe, entry=entry, entry_id=entry.entry_id, user=user, action=action,
        before=before, after=after,
    ).save()
    if content_changed:
        schedule_lore_sync(universe=entry.universe)
    return changed_fields


@transaction.atomic
def lore_entry_delete(*, entry: LoreEntry, user, action: str = LoreRevision.Action.DELETE) -> None:
    """Delete an entry; its last state (and who linked to it) stays in the revision history."""
    before = lore_entry_snapshot(entry)
    before["backlinks"] = sorted(entry.backlinks.values_list("entry_id", flat=True))
    universe = entry.universe
    _record(
        universe=universe, entry=None, entry_id=entry.entry_id, user=user, action=action,
        before=before, after=None,
    ).save()
    entry.delete()
    schedule_lore_sync(universe=universe)


def _restorable_activation(state: dict[str, Any]) -> dict[str, Any]:
    """The activation fields a revision recorded; a revision from before they existed has none."""
    from studio.universes.activation import NAMES

    return {name: state[name] for name in NAMES if name in state}


@transaction.atomic
def lore_entry_restore(*, revision: LoreRevision, user) -> LoreEntry:
    """Bring an entry back to the state a revision recorded (re-creating it if deleted)."""
    state = revision.after if revision.after is not None else revision.before
    if not state:
        raise ValidationError("This revision holds no state to restore.")
    universe = revision.universe
    wanted = set(state.get("links", [])) | set(state.get("backlinks", []))
    by_id = {e.entry_id: e for e in universe.lore_entries.filter(entry_id__in=wanted)}
    links = [by_id[i] for i in state.get("links", []) if i in by_id]
    entry = universe.lore_entries.filter(entry_id=revision.entry_id).first()
    if entry is None:
        entry = lore_entry_create(
            universe=universe, user=user, title=state["title"], kind=state["kind"],
            text=state.get("text", ""), keys=state.get("keys", []), links=links,
            entry_id=revision.entry_id, extensions=state.get("extensions") or {},
            activation=_restorable_activation(state), strict_keys=False,
            action=LoreRevision.Action.RESTORE,
        )
    else:
        lore_entry_update(
            entry=entry, user=user, title=state["title"], kind=state["kind"],
            text=state.get("text", ""), keys=state.get("keys", []), links=links,
            extensions=state.get("extensions") or {}, activation=_restorable_activation(state),
            strict_keys=False, action=LoreRevision.Action.RESTORE,
        )
    for source_id in state.get("backlinks", []):
        if source_id in by_id:
            by_id[source_id].links.add(entry)
    return entry


@transaction.atomic
def lore_bulk_delete(*, universe: Universe, user, entry_ids: Sequence[str]) -> int:
    """Delete the chosen entries, each with a revision; return how many were deleted."""
    entries = list(
        universe.lore_entries.filter(entry_id__in=entry_ids).prefetch_related("links", "backlinks")
    )
    revisions = []
    for entry in entries:
        before = lore_entry_snapshot(entry)
        before["backlinks"] = sorted(e.entry_id for e in entry.backlinks.all())
        revisions.append(
            _record(universe=universe, entry=None, entry_id=entry.entry_id, user=user,
                    action=LoreRevision.Action.DELETE, before=before, after=None)
        )
    LoreRevision.objects.bulk_create(revisions)
    universe.lore_entries.filter(pk__in=[e.pk for e in entries]).delete()
    if entries:
        schedule_lore_sync(universe=universe)
    return len(entries)


@transaction.atomic
def lore_bulk_set_kind(*, universe: Universe, user, entry_ids: Sequence[str], kind: str) -> int:
    """Give the chosen entries one kind, each with a revision; return how many changed."""
    if kind not in LoreKind.values:
        raise ValidationError({"kind": f"Unknown kind “{kind}”."})
    entries = list(
        with_link_ids(universe.lore_entries.filter(entry_id__in=entry_ids).exclude(kind=kind))
    )
    revisions = []
    now = timezone.now()
    for entry in entries:
        before = lore_entry_snapshot(entry)
        entry.kind = kind
        entry.updated_at = now  # bulk_update skips auto_now
        revisions.append(
            _record(universe=universe, entry=entry, entry_id=entry.entry_id, user=user,
                    action=LoreRevision.Action.UPDATE, before=before,
                    after={**before, "kind": kind})
        )
    LoreEntry.objects.bulk_update(entries, ["kind", "updated_at"])
    LoreRevision.objects.bulk_create(revisions)
    return len(entries)


@transaction.atomic
def lore_bulk_set_activation(*, universe: Universe, user, entry_ids: Sequence[str], values: dict[str, Any]) -> int:
    """Give the chosen entries the same activation values, each with a revision; return how many changed."""
    values = activation_validate(values, strict_keys=True)
    if not values:
        return 0
    entries = list(with_link_ids(universe.lore_entries.filter(entry_id__in=entry_ids)))
    revisions, changed = [], []
    now = timezone.now()
    for entry in entries:
        before = lore_entry_snapshot(entry)
        _apply_activation(entry, values)
        after = lore_entry_snapshot(entry)
        if after == before:
            continue
        entry.updated_at = now  # bulk_update skips auto_now
        changed.append(entry)
        revisions.append(_record(universe=universe, entry=entry, entry_id=entry.entry_id, user=user,
                                 action=LoreRevision.Action.UPDATE, before=before, after=after))
    LoreEntry.objects.bulk_update(changed, [*values, "updated_at"])
    LoreRevision.objects.bulk_create(revisions)
    return len(changed)


def _lore_bulk_create(
    *, universe: Universe, user, items: list[dict[str, Any]], links: dict[str, list[str]],
    known: dict[str, int], action: str,
) -> dict[str, LoreEntry]:
    """Create many entries at once (imports): batched INSERTs, links and revisions in bulk.

    `items` hold already-validated fields (entry_id, title, kind, text, keys, extensions);
    `links` maps a new entry's id to the ids it links to, resolved against `known` (existing
    entry id -> pk) and the new entries; unknown ids are left out. Return the new entries.
    """
    entries = []
    for item in items:
        _validate_entry_fields(title=item["title"], kind=item["kind"])
        entry = LoreEntry(
            universe=universe, entry_id=item["entry_id"], title=item["title"].strip(), kind=item["kind"],
            text=item["text"], keys=_clean_keys(item["keys"]), extensions=item.get("extensions") or {},
        )
        lore_embedding_state_set(entry, state=EmbeddingState.PENDING)
        _apply_activation(entry, activation_validate(item.get("activation") or {}, strict_keys=False))
        entries.append(entry)
    if not entries:
        return {}
    for entry, (words, tokens) in zip(entries, text_counts_many([e.text for e in entries])):
        entry.word_count, entry.token_count = words, tokens
    LoreEntry.objects.bulk_create(entries, batch_size=500)
    pks = dict(universe.lore_entries.filter(entry_id__in=[e.entry_id for e in entries]).values_list("entry_id", "pk"))
    all_pks = {**known, **pks}
    through = LoreEntry.links.through
    link_rows, revisions = [], []
    for entry in entries:
        entry.pk = pks[entry.entry_id]
        targets = sorted({t for t in links.get(entry.entry_id) or [] if t in all_pks and t != entry.entry_id})
        link_rows.extend(through(from_loreentry_id=entry.pk, to_loreentry_id=all_pks[t]) for t in targets)
        revisions.append(_record(universe=universe, entry=entry, entry_id=entry.entry_id, user=user,
                                 action=action, before=None, after=lore_entry_snapshot(entry, links=targets)))
    through.objects.bulk_create(link_rows, batch_size=1000)
    LoreRevision.objects.bulk_create(revisions, batch_size=500)
    schedule_lore_sync(universe=universe)
    return {entry.entry_id: entry for entry in entries}


# --- Lore imports (Character Card, SillyTavern) ----------------------------------------------


@dataclass
class ImportLine:
    label: str
    outcome: str  # created / updated / skipped
    reason: str
    entry_id: str = ""
    title: str = ""
    acting: list[str] = field(default_factory=list)  # file fields / decorators the studio acts on
    kept: list[str] = field(default_factory=list)  # kept for re-export only
    warnings: list[str] = field(default_factory=list)  # will behave differently than in the tool


@dataclass
class ImportReport:
    source: str
    lines: list[ImportLine] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def count(self, outcome: str) -> int:
        return sum(1 for line in self.lines if line.outcome == outcome)

    @property
    def created(self) -> int:
        return self.count("created")

    @property
    def updated(self) -> int:
        return self.count("updated")

    @property
    def skipped(self) -> int:
        return self.count("skipped")

    def as_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "notes": self.notes,
            "lines": [line.__dict__ for line in self.lines],
        }


def _match(incoming: IncomingEntry, by_id: dict, by_identity: dict, by_title: dict) -> LoreEntry | None:
    if incoming.entry_id and incoming.entry_id in by_id:
        return by_id[incoming.entry_id]
    if incoming.identity and incoming.identity in by_identity:
        return by_identity[incoming.identity]
    matches = by_title.get(incoming.title.strip().casefold(), [])
    return matches[0] if len(matches) == 1 else None


@transaction.atomic
def lore_import(*, universe: Universe, user, book: IncomingBook, default_kind: str = LoreKind.CONCEPT) -> ImportReport:
    """Create or update lore entries from an imported book; return what happened to each.

    An incoming entry matches an existing one by studio id, then by the id it had in the
    other tool (kept in `extensions`), then by a unique title. Fields the studio does not use
    are merged into the entry's `extensions`. File-level fields go to Universe_Meta.
    """
    if default_kind not in LoreKind.values:
        raise ValidationError({"default_kind": f"Unknown kind “{default_kind}”."})
    report = ImportReport(source=book.source, notes=list(book.notes))
    existing = list(with_link_ids(universe.lore_entries.all()))
    by_id = {e.entry_id: e for e in existing}
    by_identity: dict = {}
    by_title: dict[str, list[LoreEntry]] = {}
    for entry in existing:
        by_title.setdefault(entry.title.strip().casefold(), []).append(entry)
        for ext_name, ext in (entry.extensions or {}).items():
            if isinstance(ext, dict):
                for field_name in ("uid", "id"):
                    if field_name in ext:
                        try:
                            by_identity[(ext_name, field_name, ext[field_name])] = entry
                        except TypeError:  # an unhashable id is no identity
                            pass
    taken = set(by_id)
    seen: set[int] = set()
    pending_links: list[tuple[LoreEntry, list[str], str]] = []
    to_create: list[dict[str, Any]] = []
    new_links: dict[str, list[str]] = {}
    incoming_ids = {i.entry_id for i in book.entries if i.entry_id}
    for incoming in book.entries:
        if incoming.skip_reason:
            report.lines.append(ImportLine(incoming.label, "skipped", incoming.skip_reason, title=incoming.title))
            continue
        warnings = list(incoming.warnings) + [
            f"{problem} It is matched as plain text, as SillyTavern does; fix it in the entry."
            for problem in invalid_regex_keys({"keys": incoming.keys, **incoming.activation})]
        effect = {"acting": list(incoming.acting), "kept": list(incoming.kept), "warnings": warnings}
        target = _match(incoming, by_id, by_identity, by_title)
        if target is not None and target.pk in seen:
            report.lines.append(ImportLine(
                incoming.label, "skipped",
                f"matches “{target.title}”, which an earlier entry of this file already imported",
                target.entry_id, incoming.title))
            continue
        if target is None:
            entry_id = incoming.entry_id
            if entry_id in taken or entry_id in RESERVED_ENTRY_IDS or not SLUG_RE.match(entry_id):
                entry_id = ""
            if not entry_id:
                entry_id = lore_entry_id_for(universe=universe, title=incoming.title, taken=taken)
            taken.add(entry_id)
            to_create.append({
                "entry_id": entry_id, "title": incoming.title, "kind": incoming.kind or default_kind,
                "text": incoming.text, "keys": incoming.keys, "extensions": incoming.extensions,
                "activation": incoming.activation,
            })
            if incoming.links is not None:
                new_links[entry_id] = incoming.links
                missing = [i for i in incoming.links if i not in by_id and i not in incoming_ids]
                if missing:
                    report.notes.append(f"{incoming.label}: links to unknown entries dropped: {', '.join(missing)}")
            report.lines.append(ImportLine(incoming.label, "created", "new entry", entry_id, incoming.title.strip(),
                                           **effect))
            continue
        seen.add(target.pk)
        extensions = {**(target.extensions or {}), **incoming.extensions}
        changed = lore_entry_update(
            entry=target, user=user, title=incoming.title, kind=incoming.kind or None,
            text=incoming.text, keys=incoming.keys, extensions=extensions,
            activation=incoming.activation, strict_keys=False, action=LoreRevision.Action.IMPORT,
        )
        if incoming.links is not None:
            pending_links.append((target, incoming.links, incoming.label))
        how = "same id" if incoming.entry_id == target.entry_id else (
            "same id in the source tool" if incoming.identity and by_identity.get(incoming.identity) is target
            else "same title")
        report.lines.append(ImportLine(
            incoming.label, "updated" if changed else "skipped",
            f"changed {', '.join(changed)}; matched by {how}" if changed
            else f"identical to the existing entry (matched by {how})",
            target.entry_id, target.title, **effect))
    known = {entry_id: entry.pk for entry_id, entry in by_id.items()}
    by_id.update(_lore_bulk_create(universe=universe, user=user, items=to_create, links=new_links,
                                   known=known, action=LoreRevision.Action.IMPORT))
    for entry, link_ids, label in pending_links:
        targets = [by_id[i] for i in link_ids if i in by_id and i != entry.entry_id]
        missing = [i for i in link_ids if i not in by_id]
        if missing:
            report.notes.append(f"{label}: links to unknown entries dropped: {', '.join(missing)}")
        current = sorted(link.entry_id for link in entry.links.all())
        if sorted(t.entry_id for t in targets) != current:
            changed = lore_entry_update(entry=entry, user=user, links=targets, action=LoreRevision.Action.IMPORT)
            if changed:
                for line in report.lines:
                    if line.entry_id == entry.entry_id and line.outcome == "skipped" and line.reason.startswith("identical"):
                        line.outcome, line.reason = "updated", "links changed"
    for key, value in book.meta.items():
        meta_set(universe=universe, key=key, value=value)
    current = dict(universe.meta.filter(key__in=list(book.defaults)).values_list("key", "value"))
    for key, value in sorted(book.defaults.items()):
        if key not in current:
            meta_set(universe=universe, key=key, value=value)
            report.notes.append(f"The book's setting became the universe's {key} = {value}.")
        elif current[key] != value:
            report.notes.append(f"The book asks for {key} = {value}; the universe keeps its own {current[key]}.")
    return report


# --- Universe-as-Code import -------------------------------------------------------------------


@transaction.atomic
def universe_import_document(*, user, document, universe: Universe | None = None) -> tuple[Universe, dict[str, int]]:
    """Make a universe match a Universe-as-Code document exactly; create it if needed.

    Entries missing from the document are deleted (with revisions, so they can be restored).
    Return the universe and counts of created / updated / deleted / unchanged entries.
    """
    if universe is None:
        universe = universe_create(
            user=user, name=document.name, slug=document.slug, description=document.description
        )
    else:
        if universe.name != document.name or universe.description != document.description:
            universe.name, universe.description = document.name, document.description
            universe.save(update_fields=["name", "description", "updated_at"])
    wanted_meta = document.meta_values()
    for row in list(universe.meta.all()):
        if row.key not in wanted_meta:
            row.delete()
    for key, value in wanted_meta.items():
        UniverseMeta.objects.update_or_create(universe=universe, key=key, defaults={"value": value})

    outcome: dict[str, str] = {}
    deleted = 0
    existing = {e.entry_id: e for e in with_link_ids(universe.lore_entries.all())}
    doc_ids = {lore.entry_id for lore in document.lore}
    for entry_id, entry in existing.items():
        if entry_id not in doc_ids:
            lore_entry_delete(entry=entry, user=user)
            deleted += 1
    by_id = {k: v for k, v in existing.items() if k in doc_ids}
    new_docs = [lore for lore in document.lore if lore.entry_id not in by_id]
    created = _lore_bulk_create(
        universe=universe, user=user,
        items=[{"entry_id": lore.entry_id, "title": lore.title, "kind": lore.kind, "text": lore.text,
                "keys": lore.keys, "extensions": lore.extensions, "activation": lore.activation}
               for lore in new_docs],
        links={lore.entry_id: lore.links for lore in new_docs},
        known={entry_id: entry.pk for entry_id, entry in by_id.items()},
        action=LoreRevision.Action.IMPORT,
    )
    for lore in document.lore:
        entry = by_id.get(lore.entry_id)
        if entry is None:
            outcome[lore.entry_id] = "created"
            continue
        changed = lore_entry_update(
            entry=entry, user=user, title=lore.title, kind=lore.kind, text=lore.text,
            keys=lore.keys, extensions=lore.extensions, activation=lore.activation, strict_keys=False,
            action=LoreRevision.Action.IMPORT,
        )
        outcome[lore.entry_id] = "updated" if changed else "unchanged"
    by_id.update(created)
    for lore in document.lore:
        if lore.entry_id in created:
            continue  # created with its links
        entry = by_id[lore.entry_id]
        current = sorted(link.entry_id for link in entry.links.all())
        if current != sorted(lore.links):
            changed = lore_entry_update(
                entry=entry, user=user, links=[by_id[i] for i in lore.links],
                action=LoreRevision.Action.IMPORT,
            )
            if changed and outcome[lore.entry_id] == "unchanged":
                outcome[lore.entry_id] = "updated"
    counts = {name: sum(1 for v in outcome.values() if v == name) for name in ("created", "updated", "unchanged")}
    counts["deleted"] = deleted
    return universe, counts


def lore_extension(entry: LoreEntry) -> dict[str, Any]:
    """Return the studio's own fields as exported into other tools' `extensions`."""
    return {
        "entry_id": entry.entry_id,
        "kind": entry.kind,
        "links": sorted(link.entry_id for link in entry.links.all()),
    }


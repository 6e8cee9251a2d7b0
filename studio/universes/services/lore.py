"""Writes for the Lore Book: one entry at a time (create, update, delete, restore), its
revisions, and the embedding sync every lore write queues.

Every change to a lore entry records a `LoreRevision` (who, when, before, after); work
outside the database (the embedding job) is queued with `transaction.on_commit`.

What a revision keeps and the entry's counts are in lore_rows.py (the demo loader records
its revisions with them too); links to entries not written yet in lore_links.py; the bulk
actions and the imports' bulk create in lore_bulk.py.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Iterable, Sequence
from typing import Any

from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils.text import slugify

from studio.memory.lore.embedding_state import lore_embedding_state_set
from studio.universes.activation import activation_validate
from studio.universes.models import LoreRevision
from studio.world.models import EmbeddingState, LoreEntry, LoreKind, Universe
from studio.universes.services.lore_links import _resolve_pending_links, _set_pending_links
from studio.universes.services.lore_rows import lore_counts_apply, lore_entry_snapshot, lore_revision
from studio.universes.services.universes import RESERVED_ENTRY_IDS, _unique_slug

logger = logging.getLogger(__name__)


class LoreEditConflict(Exception):
    """An edit based on `base_version` met a newer saved version: nothing was written.

    `theirs` is the entry as saved now (a `lore_entry_snapshot`, version `current_version`),
    `mine` the same snapshot with the edit applied; `fields` names what differs between them.
    The view shows both and lets the author keep theirs, overwrite, or save a merge (each a
    new edit based on `current_version`).
    """

    def __init__(
        self,
        *,
        entry: LoreEntry,
        base_version: int,
        theirs: dict[str, Any],
        mine: dict[str, Any],
        changed_by: str,
        changed_at,
    ):
        self.entry = entry
        self.base_version = base_version
        self.current_version = entry.version
        self.theirs = theirs
        self.mine = mine
        self.fields = [name for name in mine if mine[name] != theirs.get(name)]
        self.changed_by = changed_by
        self.changed_at = changed_at
        super().__init__(
            f"“{entry.title}” was saved as version {entry.version} while you edited version {base_version}."
        )


def _lock_current(entry: LoreEntry) -> LoreEntry:
    """Lock the entry's row (SELECT ... FOR UPDATE) and load its current state into `entry`.

    Every write of an entry goes through here first, so the version check and the write it
    guards see the same row, and two writers queue instead of both passing the check.
    """
    locked = LoreEntry.objects.select_for_update().get(pk=entry.pk)
    for field in LoreEntry._meta.concrete_fields:
        setattr(entry, field.attname, getattr(locked, field.attname))
    getattr(entry, "_prefetched_objects_cache", {}).pop("links", None)
    return entry


def _last_author(entry: LoreEntry) -> tuple[str, Any]:
    revision = (
        entry.universe.lore_revisions.filter(entry_id=entry.entry_id)
        .select_related("author")
        .order_by("-created_at", "-pk")
        .first()
    )
    if revision is None:
        return "", entry.updated_at
    return (revision.author.get_username() if revision.author else ""), revision.created_at


# --- Lore Book ----------------------------------------------------------------------------

UNCHANGED = object()


def known_by_validate(value) -> list[str] | None:
    """Return a clean `known_by` (None: everyone; [] nobody but the narrator; else the names).

    Raise ValidationError({"known_by": ...}) for anything but None or a list of up to 100
    names of up to 200 characters.
    """
    if value is None:
        return None
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
        raise ValidationError({"known_by": "Known by is a list of character, faction or entry names."})
    names: list[str] = []
    for name in (" ".join(v.split()) for v in value):
        if name and name.casefold() not in {n.casefold() for n in names}:
            names.append(name)
    if len(names) > 100 or any(len(n) > 200 for n in names):
        raise ValidationError({"known_by": "At most 100 names of at most 200 characters."})
    return names


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
        taken = set(universe.lore_entries.filter(entry_id__startswith=base).values_list("entry_id", flat=True))
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
    known_by: list[str] | None = None,
    pending_links: Sequence[str] = (),
) -> LoreEntry:
    """Create a lore entry, record its revision and queue its embedding.

    `activation` holds activation fields (studio defaults for the rest: see activation.py);
    with `strict_keys` a regex key that does not compile is refused, naming the key.
    `pending_links` names entries not written yet (titles or ids): kept until they appear.
    Links other entries left pending for this entry's title or id are resolved.
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
        known_by=known_by_validate(known_by),
    )
    lore_embedding_state_set(entry, state=EmbeddingState.PENDING)
    _apply_activation(entry, activation)
    lore_counts_apply(entry)
    entry.full_clean(exclude=["links"])
    entry.save()
    if links:
        entry.links.set([link for link in links if link.universe_id == universe.pk and link.pk != entry.pk])
    lore_revision(
        universe=universe,
        entry=entry,
        entry_id=entry.entry_id,
        user=user,
        action=action,
        before=None,
        after=lore_entry_snapshot(entry),
    ).save()
    _set_pending_links(entry, pending_links)
    _resolve_pending_links(universe, [entry], user)
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
    base_version: int | None = None,
    known_by: Any = UNCHANGED,
    pending_links: Sequence[str] | None = None,
) -> list[str]:
    """Apply the given changes (None = unchanged); record a revision. Return the changed fields.

    `pending_links` replaces the names of entries not written yet this entry links to
    ("pending_links" is then among the changed fields when they differ); a new title
    resolves the links other entries left pending for it.

    `activation` changes only the activation fields it names; keys are checked as in create.
    The row is locked and re-read first; with `base_version` (the version the author's form
    was based on) a newer saved version raises `LoreEditConflict` and writes nothing. Without
    it (restores, imports) the changes apply to the current row. Every write raises the
    version by one.
    """
    clean_keys = _clean_keys(keys) if keys is not None else None
    if known_by is not UNCHANGED:
        known_by = known_by_validate(known_by)
    activation = activation_validate(
        activation or {}, strict_keys=strict_keys, primary_keys=clean_keys if clean_keys is not None else []
    )
    _lock_current(entry)
    before = lore_entry_snapshot(entry)
    new_title = before["title"] if title is None else title.strip()
    new_kind = before["kind"] if kind is None else kind
    _validate_entry_fields(title=new_title, kind=new_kind)
    if base_version is not None and base_version != entry.version:
        mine = {**before, "title": new_title, "kind": new_kind, **activation}
        if text is not None:
            mine["text"] = text
        if clean_keys is not None:
            mine["keys"] = clean_keys
        if links is not None:
            mine["links"] = sorted(link.entry_id for link in links if link.pk != entry.pk)
        if extensions is not None:
            mine["extensions"] = extensions
        changed_by, changed_at = _last_author(entry)
        raise LoreEditConflict(
            entry=entry,
            base_version=base_version,
            theirs=before,
            mine=mine,
            changed_by=changed_by,
            changed_at=changed_at,
        )
    entry.title, entry.kind = new_title, new_kind
    if text is not None:
        entry.text = text
    if clean_keys is not None:
        entry.keys = clean_keys
    if extensions is not None:
        entry.extensions = extensions
    if known_by is not UNCHANGED:
        entry.known_by = known_by
    _apply_activation(entry, activation)
    link_ids = before["links"]
    if links is not None:
        links = [link for link in links if link.universe_id == entry.universe_id and link.pk != entry.pk]
        link_ids = sorted(link.entry_id for link in links)
    after = lore_entry_snapshot(entry, links=link_ids)
    changed_fields = [name for name in after if after[name] != before[name]]
    if pending_links is not None and _set_pending_links(entry, pending_links):
        changed_fields.append("pending_links")
    if not [name for name in changed_fields if name != "pending_links"]:
        return changed_fields
    content_changed = any(before[f] != after[f] for f in ("title", "text", "keys"))
    if content_changed:
        lore_embedding_state_set(entry, state=EmbeddingState.PENDING)
    if before["text"] != after["text"] or entry.word_count is None:
        lore_counts_apply(entry)
    entry.version += 1
    entry.full_clean(exclude=["links"])
    entry.save()
    if links is not None and link_ids != before["links"]:
        entry.links.set(links)
    lore_revision(
        universe=entry.universe,
        entry=entry,
        entry_id=entry.entry_id,
        user=user,
        action=action,
        before=before,
        after=after,
    ).save()
    if before["title"] != after["title"]:
        _resolve_pending_links(entry.universe, [entry], user)
    if content_changed:
        schedule_lore_sync(universe=entry.universe)
    return changed_fields


@transaction.atomic
def lore_entry_delete(*, entry: LoreEntry, user, action: str = LoreRevision.Action.DELETE) -> None:
    """Delete an entry; its last state (and who linked to it) stays in the revision history."""
    before = lore_entry_snapshot(entry)
    before["backlinks"] = sorted(entry.backlinks.values_list("entry_id", flat=True))
    universe = entry.universe
    lore_revision(
        universe=universe,
        entry=None,
        entry_id=entry.entry_id,
        user=user,
        action=action,
        before=before,
        after=None,
    ).save()
    entry.delete()
    schedule_lore_sync(universe=universe)


def _restorable_activation(state: dict[str, Any]) -> dict[str, Any]:
    """The activation fields a revision recorded; a revision from before they existed has none."""
    from studio.universes.activation import NAMES

    return {name: state[name] for name in NAMES if name in state}


@transaction.atomic
def lore_entry_restore(*, revision: LoreRevision, user) -> LoreEntry:
    """Bring an entry back to the state a revision recorded (re-creating it if deleted).

    Who knows the entry (`known_by`, its secrecy) comes back with the rest; a revision
    recorded before `known_by` existed has no such key and leaves it as it is (a re-created
    entry is everyone's), like the activation fields.
    """
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
            universe=universe,
            user=user,
            title=state["title"],
            kind=state["kind"],
            text=state.get("text", ""),
            keys=state.get("keys", []),
            links=links,
            entry_id=revision.entry_id,
            extensions=state.get("extensions") or {},
            activation=_restorable_activation(state),
            strict_keys=False,
            action=LoreRevision.Action.RESTORE,
            known_by=state.get("known_by"),
        )
    else:
        lore_entry_update(
            entry=entry,
            user=user,
            title=state["title"],
            kind=state["kind"],
            text=state.get("text", ""),
            keys=state.get("keys", []),
            links=links,
            extensions=state.get("extensions") or {},
            activation=_restorable_activation(state),
            strict_keys=False,
            action=LoreRevision.Action.RESTORE,
            known_by=state["known_by"] if "known_by" in state else UNCHANGED,
        )
    for source_id in state.get("backlinks", []):
        if source_id in by_id:
            by_id[source_id].links.add(entry)
    return entry

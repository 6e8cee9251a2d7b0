"""Lore imports: Character Card and SillyTavern books, and Universe-as-Code documents.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from django.core.exceptions import ValidationError
from django.db import transaction

from studio.universes.activation import invalid_regex_keys
from studio.universes.interchange import IncomingBook, IncomingEntry
from studio.universes.interchange.card_fields import CARD_TAG_EXTENSION
from studio.universes.models import LoreEntry, LoreKind, LoreRevision, Universe, UniverseMeta
from studio.universes.selectors import with_link_ids
from studio.universes.services.lore import _lore_bulk_create, lore_entry_delete, lore_entry_id_for, lore_entry_update
from studio.universes.services.universes import RESERVED_ENTRY_IDS, SLUG_RE, meta_set, universe_create

logger = logging.getLogger(__name__)

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
def lore_import(*, universe: Universe, user, book: IncomingBook, default_kind: str = LoreKind.CONCEPT,
                match_titles: bool = True, match_ids: bool = True, card: str = "",
                report: ImportReport | None = None) -> ImportReport:
    """Create or update lore entries from an imported book; return what happened to each.

    An incoming entry matches an existing one by studio id (`match_ids`), then by the id it
    had in the other tool (kept in `extensions`), then by a unique title (`match_titles`).
    With `card` (the entry_id of the Character entry a card made), the book's entries are
    tagged `extensions["card"] = card` and the other tool's ids match only entries tagged
    with the same card. Fields the studio does not use are merged into the entry's
    `extensions`. File-level fields go to Universe_Meta.
    """
    if default_kind not in LoreKind.values:
        raise ValidationError({"default_kind": f"Unknown kind “{default_kind}”."})
    if report is None:
        report = ImportReport(source=book.source)
    report.notes.extend(book.notes)
    existing = list(with_link_ids(universe.lore_entries.all()))
    by_id = {e.entry_id: e for e in existing}
    by_identity: dict = {}
    by_title: dict[str, list[LoreEntry]] = {}
    for entry in existing:
        if match_titles:
            by_title.setdefault(entry.title.strip().casefold(), []).append(entry)
        if card and (entry.extensions or {}).get(CARD_TAG_EXTENSION) != card:
            continue
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
    matchable = by_id if match_ids else {}
    renamed: dict[str, str] = {}  # the file's studio id -> the id a new entry got instead
    for incoming in book.entries:
        if card:
            incoming.extensions = {**incoming.extensions, CARD_TAG_EXTENSION: card}
        if incoming.skip_reason:
            report.lines.append(ImportLine(incoming.label, "skipped", incoming.skip_reason, title=incoming.title))
            continue
        warnings = list(incoming.warnings) + [
            f"{problem} It is matched as plain text, as SillyTavern does; fix it in the entry."
            for problem in invalid_regex_keys({"keys": incoming.keys, **incoming.activation})]
        effect = {"acting": list(incoming.acting), "kept": list(incoming.kept), "warnings": warnings}
        target = _match(incoming, matchable, by_identity, by_title)
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
            if incoming.entry_id and incoming.entry_id != entry_id:
                renamed[incoming.entry_id] = entry_id
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
    if renamed:  # links between the file's entries follow them to their new ids
        new_links = {k: [renamed.get(i, i) for i in v] for k, v in new_links.items()}
        pending_links = [(e, [renamed.get(i, i) for i in ids], label) for e, ids, label in pending_links]
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

"""Lore imports: Character Card and SillyTavern books, and Universe-as-Code documents."""

from __future__ import annotations

import copy
import logging
from dataclasses import dataclass, field
from typing import Any

from django.core.exceptions import ValidationError
from django.db import transaction

from studio.memory.lore_activation import REGEX_TIMEOUT
from studio.universes.activation import bounded_regex_keys, hazardous_regex_keys, invalid_regex_keys
from studio.universes.interchange import KNOWN_BY_ABSENT, IncomingBook, IncomingEntry
from studio.universes.interchange.card_fields import CARD_TAG_EXTENSION
from studio.universes.memory_tests.services import memory_tests_replace
from studio.universes.models import LoreRevision
from studio.world.models import LoreEntry, LoreKind, Universe, UniverseMeta
from studio.universes.selectors import with_link_ids
from studio.universes.services.lore import lore_entry_delete, lore_entry_id_for, lore_entry_update
from studio.universes.services.lore_bulk import _lore_bulk_create
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


@dataclass
class _Step:
    """One incoming entry's planned outcome: "skip" (its line is final), "create" or "update"."""

    action: str
    line: ImportLine
    incoming: IncomingEntry | None = None
    target: LoreEntry | None = None
    how: str = ""


@dataclass
class _ImportPlan:
    """What an import will write, decided before anything is written."""

    steps: list[_Step] = field(default_factory=list)
    to_create: list[dict[str, Any]] = field(default_factory=list)
    new_links: dict[str, list[str]] = field(default_factory=dict)
    renamed: dict[str, str] = field(default_factory=dict)  # the file's studio id -> the id a new entry got
    by_id: dict[str, LoreEntry] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def _identities(existing: list[LoreEntry], card: str) -> dict:
    """The other tool's ids (`uid` / `id` in an entry's extensions) -> the entry, for re-matching."""
    by_identity: dict = {}
    for entry in existing:
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
    return by_identity


def _refuse_catastrophic_keys(entries) -> None:
    """Refuse the whole import when an entry carries a regex key known to be catastrophic.

    `entries` are (label, title, keys, activation) of the entries the import would write.
    """
    problems = []
    for label, title, keys, activation in entries:
        for message in hazardous_regex_keys({"keys": keys, **activation}):
            problems.append(f"{label} (“{title}”): {message}")
    if problems:
        raise ValidationError(problems)


def _bounded_regex_note(book: IncomingBook) -> str:
    count = sum(len(bounded_regex_keys({"keys": i.keys, **i.activation})) for i in book.entries if not i.skip_reason)
    if not count:
        return ""
    return (
        f"{count} regex key{'s' if count != 1 else ''} use{'' if count != 1 else 's'} a feature RE2 lacks "
        f"(\\b, \\w, \\d, \\s, look-around or back-references): "
        f"{'they run' if count != 1 else 'it runs'} on the backtracking `regex` module with a "
        f"{int(REGEX_TIMEOUT * 1000)} ms limit per search; a search past the limit counts as not matching "
        f"and Lore health lists it."
    )


def _plan_import(
    *, universe: Universe, book: IncomingBook, default_kind: str, match_titles: bool, match_ids: bool, card: str
) -> _ImportPlan:
    """Match every incoming entry and decide what happens to it; write nothing."""
    _refuse_catastrophic_keys((i.label, i.title, i.keys, i.activation) for i in book.entries if not i.skip_reason)
    existing = list(with_link_ids(universe.lore_entries.all()))
    plan = _ImportPlan(by_id={e.entry_id: e for e in existing})
    by_identity = _identities(existing, card)
    by_title: dict[str, list[LoreEntry]] = {}
    if match_titles:
        for entry in existing:
            by_title.setdefault(entry.title.strip().casefold(), []).append(entry)
    taken = set(plan.by_id)
    seen: set[int] = set()
    incoming_ids = {i.entry_id for i in book.entries if i.entry_id}
    matchable = plan.by_id if match_ids else {}
    for incoming in book.entries:
        if card:
            incoming.extensions = {**incoming.extensions, CARD_TAG_EXTENSION: card}
        if incoming.skip_reason:
            plan.steps.append(
                _Step("skip", ImportLine(incoming.label, "skipped", incoming.skip_reason, title=incoming.title))
            )
            continue
        warnings = list(incoming.warnings) + [
            f"{problem} It is matched as plain text, as SillyTavern does; fix it in the entry."
            for problem in invalid_regex_keys({"keys": incoming.keys, **incoming.activation})
        ]
        effect = {"acting": list(incoming.acting), "kept": list(incoming.kept), "warnings": warnings}
        target = _match(incoming, matchable, by_identity, by_title)
        if target is not None and target.pk in seen:
            plan.steps.append(
                _Step(
                    "skip",
                    ImportLine(
                        incoming.label,
                        "skipped",
                        f"matches “{target.title}”, which an earlier entry of this file already imported",
                        target.entry_id,
                        incoming.title,
                    ),
                )
            )
            continue
        if target is None:
            entry_id = incoming.entry_id
            if entry_id in taken or entry_id in RESERVED_ENTRY_IDS or not SLUG_RE.match(entry_id):
                entry_id = ""
            if not entry_id:
                entry_id = lore_entry_id_for(universe=universe, title=incoming.title, taken=taken)
            taken.add(entry_id)
            if incoming.entry_id and incoming.entry_id != entry_id:
                plan.renamed[incoming.entry_id] = entry_id
            plan.to_create.append(
                {
                    "entry_id": entry_id,
                    "title": incoming.title,
                    "kind": incoming.kind or default_kind,
                    "text": incoming.text,
                    "keys": incoming.keys,
                    "extensions": incoming.extensions,
                    "activation": incoming.activation,
                    "known_by": None if incoming.known_by == KNOWN_BY_ABSENT else incoming.known_by,
                }
            )
            if incoming.links is not None:
                plan.new_links[entry_id] = incoming.links
                missing = [i for i in incoming.links if i not in plan.by_id and i not in incoming_ids]
                if missing:
                    plan.notes.append(f"{incoming.label}: links to unknown entries dropped: {', '.join(missing)}")
            plan.steps.append(
                _Step(
                    "create",
                    ImportLine(incoming.label, "created", "new entry", entry_id, incoming.title.strip(), **effect),
                )
            )
            continue
        seen.add(target.pk)
        how = (
            "same id"
            if incoming.entry_id == target.entry_id
            else (
                "same id in the source tool"
                if incoming.identity and by_identity.get(incoming.identity) is target
                else "same title"
            )
        )
        plan.steps.append(
            _Step(
                "update",
                ImportLine(incoming.label, "", "", target.entry_id, target.title, **effect),
                incoming=incoming,
                target=target,
                how=how,
            )
        )
    if plan.renamed:  # links between the file's entries follow them to their new ids
        plan.new_links = {k: [plan.renamed.get(i, i) for i in v] for k, v in plan.new_links.items()}
    return plan


def _apply_import(*, universe: Universe, user, book: IncomingBook, plan: _ImportPlan, report: ImportReport) -> None:
    """Write what the plan decided, in the file's order; fill in the report."""
    pending_links: list[tuple[LoreEntry, list[str], str]] = []
    for step in plan.steps:
        if step.action == "update":
            incoming, target = step.incoming, step.target
            extensions = {**(target.extensions or {}), **incoming.extensions}
            changed = lore_entry_update(
                entry=target,
                user=user,
                title=incoming.title,
                kind=incoming.kind or None,
                text=incoming.text,
                keys=incoming.keys,
                extensions=extensions,
                activation=incoming.activation,
                strict_keys=False,
                action=LoreRevision.Action.IMPORT,
                **({} if incoming.known_by == KNOWN_BY_ABSENT else {"known_by": incoming.known_by}),
            )
            if incoming.links is not None:
                pending_links.append((target, [plan.renamed.get(i, i) for i in incoming.links], incoming.label))
            step.line.outcome = "updated" if changed else "skipped"
            step.line.reason = (
                f"changed {', '.join(changed)}; matched by {step.how}"
                if changed
                else f"identical to the existing entry (matched by {step.how})"
            )
            step.line.title = target.title
        report.lines.append(step.line)
    report.notes.extend(plan.notes)
    by_id = plan.by_id
    known = {entry_id: entry.pk for entry_id, entry in by_id.items()}
    by_id.update(
        _lore_bulk_create(
            universe=universe,
            user=user,
            items=plan.to_create,
            links=plan.new_links,
            known=known,
            action=LoreRevision.Action.IMPORT,
        )
    )
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
                    if (
                        line.entry_id == entry.entry_id
                        and line.outcome == "skipped"
                        and line.reason.startswith("identical")
                    ):
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


def lore_import_title_merges(
    *, universe: Universe, book: IncomingBook, match_titles: bool = True, match_ids: bool = True, card: str = ""
) -> list[dict[str, str]]:
    """Return the file's entries an import would merge into existing entries by title alone; write nothing.

    Each is {"label", "title", "entry_id", "existing_title"}. The import page shows them and
    asks before merging (an entry matched by id, or by its id in the other tool, is the same
    entry and is not asked about). Raise ValidationError as `lore_import` would.
    """
    plan = _plan_import(
        universe=universe,
        book=copy.deepcopy(book),
        default_kind=LoreKind.CONCEPT,
        match_titles=match_titles,
        match_ids=match_ids,
        card=card,
    )
    return [
        {
            "label": step.line.label,
            "title": step.incoming.title.strip(),
            "entry_id": step.target.entry_id,
            "existing_title": step.target.title,
        }
        for step in plan.steps
        if step.action == "update" and step.how == "same title"
    ]


@transaction.atomic
def lore_import(
    *,
    universe: Universe,
    user,
    book: IncomingBook,
    default_kind: str = LoreKind.CONCEPT,
    match_titles: bool = True,
    match_ids: bool = True,
    card: str = "",
    report: ImportReport | None = None,
) -> ImportReport:
    """Create or update lore entries from an imported book; return what happened to each.

    An incoming entry matches an existing one by studio id (`match_ids`), then by the id it
    had in the other tool (kept in `extensions`), then by a unique title (`match_titles`).
    With `card` (the entry_id of the Character entry a card made), the book's entries are
    tagged `extensions["card"] = card` and the other tool's ids match only entries tagged
    with the same card. Fields the studio does not use are merged into the entry's
    `extensions`. File-level fields go to Universe_Meta. The import is planned first (every
    entry matched, a regex key known to be catastrophic refuses the whole file), then applied.
    """
    if default_kind not in LoreKind.values:
        raise ValidationError({"default_kind": f"Unknown kind “{default_kind}”."})
    if report is None:
        report = ImportReport(source=book.source)
    report.notes.extend(book.notes)
    plan = _plan_import(
        universe=universe,
        book=book,
        default_kind=default_kind,
        match_titles=match_titles,
        match_ids=match_ids,
        card=card,
    )
    _apply_import(universe=universe, user=user, book=book, plan=plan, report=report)
    note = _bounded_regex_note(book)
    if note:
        report.notes.append(note)
    return report


# --- Universe-as-Code import -------------------------------------------------------------------


@transaction.atomic
def universe_import_document(*, user, document, universe: Universe | None = None) -> tuple[Universe, dict[str, int]]:
    """Make a universe match a Universe-as-Code document exactly; create it if needed.

    Entries missing from the document are deleted (with revisions, so they can be restored), and so
    are memory tests. Return the universe and counts of created / updated / deleted / unchanged
    entries (and `tests_created`, ... of its memory tests).
    """
    _refuse_catastrophic_keys(
        (f"entry “{lore.entry_id}”", lore.title, lore.keys, lore.activation) for lore in document.lore
    )
    if universe is None:
        universe = universe_create(user=user, name=document.name, slug=document.slug, description=document.description)
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
        universe=universe,
        user=user,
        items=[
            {
                "entry_id": lore.entry_id,
                "title": lore.title,
                "kind": lore.kind,
                "text": lore.text,
                "keys": lore.keys,
                "extensions": lore.extensions,
                "activation": lore.activation,
                "known_by": lore.known_by,
            }
            for lore in new_docs
        ],
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
            entry=entry,
            user=user,
            title=lore.title,
            kind=lore.kind,
            text=lore.text,
            keys=lore.keys,
            extensions=lore.extensions,
            activation=lore.activation,
            strict_keys=False,
            action=LoreRevision.Action.IMPORT,
            known_by=lore.known_by,
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
                entry=entry,
                user=user,
                links=[by_id[i] for i in lore.links],
                action=LoreRevision.Action.IMPORT,
            )
            if changed and outcome[lore.entry_id] == "unchanged":
                outcome[lore.entry_id] = "updated"
    counts = {name: sum(1 for v in outcome.values() if v == name) for name in ("created", "updated", "unchanged")}
    counts["deleted"] = deleted
    tests = memory_tests_replace(universe=universe, specs=document.memory_tests)
    counts.update({f"tests_{name}": number for name, number in tests.items()})
    return universe, counts


def lore_extension(entry: LoreEntry) -> dict[str, Any]:
    """Return the studio's own fields as exported into other tools' `extensions`."""
    return {
        "entry_id": entry.entry_id,
        "kind": entry.kind,
        "links": sorted(link.entry_id for link in entry.links.all()),
        "known_by": list(entry.known_by) if entry.known_by is not None else None,
    }

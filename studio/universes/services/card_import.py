"""Character Card imports: the card becomes a Character entry, its book a set of entries of its own.

`card_import` runs in one transaction: it creates the Character entry (kind `character`;
see `interchange/card_fields.py` for which field goes where) or, when the author asks,
updates the one the card came from; keeps the PNG portrait; then imports the card's
`character_book` through `lore_import`, tagged with the Character entry's id. The book's
entries are matched only by the ids they had in the card (among the entries of the same
card) and by studio ids, never by title unless the author ticks that choice.
"""

from __future__ import annotations

import json

from django.db import transaction

from studio.universes.interchange import IncomingBook
from studio.universes.interchange.card_fields import CHARACTER_EXTENSION, entry_fields
from studio.universes.models import LoreRevision
from studio.world.models import LoreEntry, LoreKind, Universe
from studio.universes.portraits import PortraitError, portrait_clean, portrait_store
from studio.universes.services.lore import lore_entry_id_for, lore_entry_update
from studio.universes.services.lore_bulk import _lore_bulk_create
from studio.universes.services.lore_import import ImportLine, ImportReport, lore_import, lore_import_title_merges
from studio.universes.services.universes import CHARACTER_CARD_META, meta_set

CREATE, UPDATE = "create", "update"


def card_character_for(*, universe: Universe, card: dict) -> LoreEntry | None:
    """Return the Character entry a card updates: the studio id it carries, else the same name."""
    data = card.get("data") or {}
    axiom = (data.get("extensions") or {}).get("axiom") if isinstance(data.get("extensions"), dict) else None
    characters = universe.lore_entries.filter(kind=LoreKind.CHARACTER)
    if isinstance(axiom, dict) and axiom.get("entry_id"):
        found = characters.filter(entry_id=str(axiom["entry_id"])).first()
        if found is not None:
            return found
    title = entry_fields(card)["title"].casefold()
    matches = [e for e in characters if CHARACTER_EXTENSION in (e.extensions or {}) and e.title.casefold() == title]
    return matches[0] if len(matches) == 1 else None


def card_characters(*, universe: Universe) -> list[LoreEntry]:
    """The universe's Character entries that came from a card, by title."""
    return [
        e
        for e in universe.lore_entries.filter(kind=LoreKind.CHARACTER).order_by("title", "entry_id")
        if isinstance((e.extensions or {}).get(CHARACTER_EXTENSION), dict)
    ]


@transaction.atomic
def card_import(
    *,
    universe: Universe,
    user,
    book: IncomingBook,
    mode: str = CREATE,
    match_titles: bool = False,
    default_kind: str = LoreKind.CONCEPT,
) -> ImportReport:
    """Import a Character Card: its Character entry, portrait and book; return the report."""
    card = dict(book.card or {})
    report = ImportReport(source=book.source)
    if book.portrait is not None:
        try:  # decoded with a pixel limit and re-encoded, as every kept portrait (universes/portraits.py)
            card["portrait"] = portrait_store(portrait_clean(book.portrait))
        except PortraitError as exc:
            report.notes.append(f"The card's picture was not kept: {exc}")
    fields = entry_fields(card)
    target = card_character_for(universe=universe, card=card) if mode == UPDATE else None
    label = "the card's character"
    if target is None:
        entry_id = lore_entry_id_for(universe=universe, title=fields["title"])
        created = _lore_bulk_create(
            universe=universe,
            user=user,
            known={},
            links={},
            action=LoreRevision.Action.IMPORT,
            items=[
                {
                    "entry_id": entry_id,
                    "title": fields["title"],
                    "kind": LoreKind.CHARACTER,
                    "text": fields["text"],
                    "keys": fields["keys"],
                    "extensions": {CHARACTER_EXTENSION: card},
                }
            ],
        )
        target = created[entry_id]
        reason = "new Character entry" + (" (no earlier entry of this character to update)" if mode == UPDATE else "")
        report.lines.append(
            ImportLine(label, "created", reason, entry_id, target.title, acting=_filled(card), kept=_kept(card))
        )
    else:
        changed = lore_entry_update(
            entry=target,
            user=user,
            title=fields["title"],
            kind=LoreKind.CHARACTER,
            text=fields["text"],
            keys=fields["keys"],
            extensions={**(target.extensions or {}), CHARACTER_EXTENSION: card},
            strict_keys=False,
            action=LoreRevision.Action.IMPORT,
        )
        report.lines.append(
            ImportLine(
                label,
                "updated" if changed else "skipped",
                f"changed {', '.join(changed)} of the Character entry"
                if changed
                else "identical to the Character entry",
                target.entry_id,
                target.title,
                acting=_filled(card),
                kept=_kept(card),
            )
        )
    if book.portrait is not None:
        report.notes.append(
            f"The portrait ({len(book.portrait):,} bytes of PNG) is kept with “{target.title}”; "
            "the PNG export writes the card back into it."
        )
    lore_import(
        universe=universe,
        user=user,
        book=book,
        default_kind=default_kind,
        match_titles=match_titles,
        match_ids=mode == UPDATE,
        card=target.entry_id,
        report=report,
    )
    book_lines = len(report.lines) - 1
    report.notes.insert(
        0,
        f"“{target.title}” is a Character entry ({target.entry_id}); "
        f"its book's {book_lines} entr{'y' if book_lines == 1 else 'ies'} "
        f"{'is' if book_lines == 1 else 'are'} tagged with it.",
    )
    meta_set(
        universe=universe,
        key=CHARACTER_CARD_META,
        value=json.dumps(
            {"entry_id": target.entry_id, "name": target.title, "spec": card.get("spec") or "chara_card_v1"},
            ensure_ascii=False,
            sort_keys=True,
        ),
    )
    return report


def _filled(card: dict) -> list[str]:
    data = card.get("data") or {}
    placed = {
        "name": "title",
        "description": "text",
        "personality": "text (## Personality)",
        "scenario": "text (## Scenario)",
        "nickname": "keys",
    }
    return [f"{k} → {placed[k]}" for k in placed if data.get(k)]


def _kept(card: dict) -> list[str]:
    data = card.get("data") or {}
    kept = [
        k
        for k in data
        if k not in ("name", "description", "personality", "scenario", "nickname") and data[k] not in ("", [], {}, None)
    ]
    return kept + [f"{k} (V1 top level)" for k in card.get("v1") or {}]


def card_import_title_merges(
    *, universe: Universe, book: IncomingBook, mode: str = CREATE, match_titles: bool = False
) -> list[dict[str, str]]:
    """Return the card's book entries `card_import` would merge into existing entries by title; write nothing."""
    target = card_character_for(universe=universe, card=dict(book.card or {})) if mode == UPDATE else None
    # A new Character entry has no id yet: a tag no entry carries keeps the card's ids matching nothing.
    card = target.entry_id if target is not None else "\x00new-card"
    return lore_import_title_merges(
        universe=universe, book=book, match_titles=match_titles, match_ids=mode == UPDATE, card=card
    )

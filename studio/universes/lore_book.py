"""The Lore Book as the activation engine sees it, for the authoring pages (key tester, health).

Reads only. The engine is `studio.memory.lore_activation` (pure, no Django models); this
module turns a universe's entries and Universe_Meta into the engine's compiled book, once
per book version, and a save's Event_Log into the engine's scan messages.

Invariants:
- The book is compiled once per version (`compiled_book` caches it by the key built here,
  which changes whenever an entry is created, edited or deleted), never per request.
- A turn is evaluated exactly as the play loop evaluates it: the pending input is that
  turn's player input, the scan buffer the turns before it, the state the one recorded (or
  replayed) for the turn before, the seed `activation_seed(lineage root, generation, turn)`.
"""
from __future__ import annotations

from django.db.models import Count, Max

from studio.memory.lore_activation import (
    CompiledBook,
    LoreDefaults,
    activation_seed,
    compiled_book,
    defaults_from_meta,
    spec_from_entry,
)

MAX_HISTORY_TURNS = 500  # the engine's scan depth is at most 1000 messages = 500 turns


def book_version(universe) -> str:
    """A key that changes whenever an entry of the book is created, edited or deleted."""
    stats = universe.lore_entries.aggregate(newest=Max("updated_at"), top=Max("id"), total=Count("id"))
    newest = stats["newest"].isoformat() if stats["newest"] else "-"
    return f"universe-{universe.pk}:{stats['total']}:{stats['top']}:{newest}"


def universe_defaults(universe) -> LoreDefaults:
    return defaults_from_meta(dict(universe.meta.values_list("key", "value")))


def universe_book(universe, defaults: LoreDefaults | None = None) -> CompiledBook:
    """The universe's compiled book (built on first use of this book version, then cached)."""
    defaults = defaults or universe_defaults(universe)
    return compiled_book(
        version=book_version(universe), defaults=defaults,
        loader=lambda: [spec_from_entry(e) for e in universe.lore_entries.defer("extensions").order_by("entry_id")],
    )


def history_turns(book: CompiledBook) -> int:
    """How many past turns the deepest scan of this book reaches (two messages a turn)."""
    deepest = max([book.defaults.scan_depth, *[s.scan_depth or 0 for s in book.specs]])
    return min(MAX_HISTORY_TURNS, deepest // 2 + 1)


def save_seed(save, turn: int) -> str:
    """The seed of turn `turn`'s draws: the lineage root's id (a fork shares its origin's rolls)."""
    root, seen = save, set()
    while root.forked_from_id and root.forked_from_id not in seen:
        seen.add(root.forked_from_id)
        root = root.forked_from
    return activation_seed(save_id=root.save_id, generation=save.timeline_generation, turn=turn)

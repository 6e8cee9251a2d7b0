"""Who-knows-what fixtures (shared by the memory, inspector and browser tests): a universe with four
characters, a faction and secrets (`cast`), a living save of it (`living`), `no_runner`, and a
universe whose characters share name parts (`reeds`: the names rule and the memory context's focus)."""

from __future__ import annotations

import pytest

from studio.world.models import LoreEntry, Save, Universe, UniverseMeta


@pytest.fixture
def no_runner(monkeypatch):
    """Queued jobs stay queued (these tests are about rows, not the pipeline)."""
    monkeypatch.setattr("studio.memory.jobs.dispatch.send", lambda job_id, countdown=0: None)


@pytest.fixture
def cast(db, author, playtester):
    u = Universe.objects.create(name="Harbour", slug="harbour", owner=author)
    u.members.add(playtester)
    UniverseMeta.objects.create(universe=u, key="player_character", value="Ash")
    entries = {}
    for entry_id, title, kind, keys in [
        ("mira", "Mira", "character", ["the captain"]),
        ("kael", "Kael", "character", ["Kay"]),
        ("ivo", "Ivo", "character", []),
        ("watch", "The Night Watch", "faction", ["watch"]),
        ("ledger", "The Ledger", "item", ["ledger"]),
        ("tunnel", "The Tunnel", "place", ["tunnel"]),
    ]:
        entries[entry_id] = LoreEntry.objects.create(
            universe=u, entry_id=entry_id, title=title, kind=kind, keys=keys, text=f"{title} text."
        )
    entries["mira"].links.add(entries["watch"])
    entries["ledger"].known_by = ["Kael"]
    entries["ledger"].text = "The ledger hides the smugglers' debts under the chapel floor."
    entries["ledger"].save()
    entries["tunnel"].known_by = ["The Night Watch"]
    entries["tunnel"].save()
    return u


@pytest.fixture
def living(cast):
    return Save.objects.create(universe=cast, name="Run", save_id="knowrun", memory_mode="living")


# (entry id, title, kind, keys): two Reeds share a surname; "Tam" is an alias; a title beats another's key ("Crane");
# a place's name ("Vale") is never a character's part; "The" is no part of "The Ferryman"; two characters share a key.
REEDS = [
    ("tamsin-reed", "Tamsin Reed", "character", ["Tam"]),
    ("jory-reed", "Jory Reed", "character", []),
    ("mira", "Mira", "character", ["the captain"]),
    ("hesper-vale", "Hesper Vale", "character", []),
    ("vale", "Vale", "place", []),
    ("crane", "Crane", "character", []),
    ("aldous-birch", "Aldous Birch", "character", ["Crane", "the boy"]),
    ("pim", "Pim", "character", ["the boy"]),
    ("ferryman", "The Ferryman", "character", []),
]


@pytest.fixture
def reeds(db, author, playtester):
    """A universe whose characters share name parts and keys (`REEDS`); the player is Ash Vey, who has no entry."""
    u = Universe.objects.create(name="Reeds", slug="reeds", owner=author)
    u.members.add(playtester)
    UniverseMeta.objects.create(universe=u, key="player_character", value="Ash Vey")
    for entry_id, title, kind, keys in REEDS:
        LoreEntry.objects.create(
            universe=u, entry_id=entry_id, title=title, kind=kind, keys=keys, text=f"{title} text."
        )
    return u

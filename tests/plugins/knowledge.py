"""Who-knows-what fixtures (shared by the memory, inspector and browser tests): a universe with four characters, a faction and secrets (`cast`), a living save of it (`living`), and `no_runner`."""
from __future__ import annotations

import pytest

from studio.saves.models import Save
from studio.universes.models import LoreEntry, Universe, UniverseMeta


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
            universe=u, entry_id=entry_id, title=title, kind=kind, keys=keys, text=f"{title} text.")
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

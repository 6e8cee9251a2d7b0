"""`manage.py load_demo`: the demo universe and save load completely and idempotently."""

from __future__ import annotations

import io
import json
import re
import sys
import types

import pytest
from django.core import serializers
from django.core.management import CommandError, call_command

from studio.memory.missions import get_belief_missions, get_universe_mission
from studio.memory.models import Fact, LoreActivation, RecordedQuery
from studio.saves.models import NarratorAlternative, NarratorDraft, NarratorSnapshot
from studio.world.models import EmbeddingState, Event, LoreEntry, MemoryMode, Save, StateCache, Universe, UniverseMeta
from studio.universes.demo.loader import SAVE_FILE, UNIVERSE_FILE, DemoDataError, demo_read
from studio.universes.models import LoreRevision
from tests.fakes import FakeVectorMemory

SLUG = "the-drowned-reach"
SAVE_ID = "drowned-reach-demo"
MAIN_KINDS = ("character", "place", "faction", "item")


def load(*args: str) -> str:
    out = io.StringIO()
    call_command(
        "load_demo", "--no-knowledge", *args, stdout=out
    )  # the knowledge save: tests/saves/test_demo_knowledge.py
    return out.getvalue()


def snapshot() -> dict[str, list]:
    """Every row the loader writes, serialized with pks, timestamps and m2m links."""
    rows = {}
    for model in (Universe, UniverseMeta, LoreEntry, LoreRevision, Save, Event, StateCache):
        rows[model.__name__] = serializers.serialize("python", model._default_manager.order_by("pk"))
    return rows


def demo_save() -> Save:
    return Save.objects.get(save_id=SAVE_ID)


@pytest.mark.django_db
def test_loads_lore_meta_and_save():
    output = load("--no-embed")

    universe = Universe.objects.get(slug=SLUG)
    entries = list(universe.lore_entries.prefetch_related("links"))
    assert len(entries) >= 25
    kinds = {kind: sum(e.kind == kind for e in entries) for kind in MAIN_KINDS}
    assert all(count >= 4 for count in kinds.values()), kinds
    assert {e.kind for e in entries} >= {"concept", "event"}
    for entry in entries:
        sentences = len(re.findall(r"[.!?]['\"]?(?=\s|$)", entry.text))
        assert 2 <= sentences <= 6, (entry.entry_id, sentences)
        assert entry.keys, entry.entry_id
        assert entry.links.exists(), entry.entry_id
        assert all(link.universe_id == universe.pk for link in entry.links.all())

    assert get_universe_mission(universe)
    missions = get_belief_missions(universe)
    assert len(missions) >= 3
    characters = {e.title for e in entries if e.kind == "character"}
    assert set(missions) <= characters
    meta = {row.key: row.value for row in universe.meta.all()}
    assert {"tone", "narrator_style"} <= set(meta)

    game_save = demo_save()
    turns = list(game_save.events.order_by("turn_id"))
    assert len(turns) >= 40
    assert [t.turn_id for t in turns] == list(range(1, len(turns) + 1))
    assert game_save.current_turn == turns[-1].turn_id
    assert game_save.memory_mode == MemoryMode.CLASSIC
    for turn in turns:
        assert turn.player_input.strip()
        assert 80 <= len(turn.narrative.split()) <= 200, turn.turn_id
    states = {row.turn_id: row.state for row in game_save.states.all()}
    assert set(states) == {t.turn_id for t in turns}
    places = {e.title for e in entries if e.kind == "place"}
    for turn_id, state in states.items():
        assert state["location"] in places, (turn_id, state["location"])
        assert set(state["party"]) <= characters, (turn_id, state["party"])
        assert isinstance(state["inventory"], list)

    assert f"{len(entries)} created" in output
    assert f"{len(turns)} created" in output


@pytest.mark.django_db
def test_save_meta_is_a_copy_of_the_universe_meta():
    load("--no-embed")
    universe = Universe.objects.get(slug=SLUG)
    meta = {row.key: row.value for row in universe.meta.all()}
    assert demo_save().meta == meta
    assert json.loads(demo_save().meta["belief_missions"]) == get_belief_missions(universe)


@pytest.mark.django_db
def test_running_twice_leaves_identical_rows():
    load("--no-embed")
    first = snapshot()
    output = load("--no-embed")
    assert snapshot() == first
    assert "Already up to date" in output
    assert " created" not in output and " updated" not in output


@pytest.mark.django_db
def test_story_tracks_the_developments_memory_must_follow():
    """The save carries a debt repaid, an item lost and found, and people changing place."""
    load("--no-embed")
    states = [row.state for row in demo_save().states.order_by("turn_id")]
    debts = [state["debts"] for state in states]
    assert any(d.get("Corvin Tull") == 40 for d in debts) and debts[-1] == {}
    key = "the Bellwright's Key"
    holding = [key in state["inventory"] for state in states]
    first = holding.index(True)
    lost = holding.index(False, first)
    assert True in holding[lost:], "the Key is lost and found again"
    assert key not in states[-1]["inventory"]  # given away at the end
    assert "Pim" in states[10]["party"] and "Pim" not in states[-1]["party"]


@pytest.mark.django_db
def test_living_option_and_reload_restores_the_files():
    load("--no-embed", "--living")
    assert demo_save().memory_mode == MemoryMode.LIVING

    universe = Universe.objects.get(slug=SLUG)
    entry = universe.lore_entries.get(entry_id="hesper-vale")
    original = entry.text
    entry.text = "Someone rewrote this."
    entry.save()
    entry.links.clear()
    game_save = demo_save()
    game_save.events.filter(turn_id=5).delete()
    last = game_save.current_turn
    Event.objects.create(game_save=game_save, turn_id=last + 1, player_input="x", narrative="y")
    StateCache.objects.create(game_save=game_save, turn_id=last + 1, state={})
    Fact.objects.create(game_save=game_save, turn_id=last + 1, statement="A later fact.")
    Fact.objects.create(game_save=game_save, turn_id=3, statement="An early fact.")
    generation = game_save.timeline_generation
    revisions = LoreRevision.objects.filter(entry_id="hesper-vale").count()

    output = load("--no-embed")

    entry.refresh_from_db()
    assert entry.text == original
    assert entry.links.count() == len(next(e for e in demo_read().lore if e["entry_id"] == "hesper-vale")["links"])
    assert LoreRevision.objects.filter(entry_id="hesper-vale").count() == revisions + 1
    game_save = demo_save()
    assert game_save.memory_mode == MemoryMode.CLASSIC
    assert game_save.current_turn == last
    assert sorted(game_save.events.values_list("turn_id", flat=True)) == list(range(1, last + 1))
    assert not game_save.states.filter(turn_id__gt=last).exists()
    assert list(game_save.facts.values_list("statement", flat=True)) == ["An early fact."]
    assert game_save.timeline_generation == generation + 1
    assert "1 removed" in output


@pytest.mark.django_db
def test_reload_drops_every_per_turn_record_after_the_last_turn():
    """The trim is a rewind: recorded queries, narrator snapshots and drafts go with the turns."""
    load("--no-embed")
    game_save = demo_save()
    last = game_save.current_turn
    Event.objects.create(game_save=game_save, turn_id=last + 1, player_input="x", narrative="y")
    for turn in (last, last + 1):
        RecordedQuery.objects.create(game_save=game_save, turn_id=turn, query_text=f"query at {turn}")
        NarratorSnapshot.objects.create(game_save=game_save, turn_id=turn, proposed=f"seen at {turn}")
    # The demo's turns were appended as play appends them: each has its lore activation row.
    assert LoreActivation.objects.filter(game_save=game_save).count() == last
    LoreActivation.objects.create(game_save=game_save, turn_id=last + 1)
    draft = NarratorDraft.objects.create(game_save=game_save, turn_id=last + 1, player_input="x")
    NarratorAlternative.objects.create(draft=draft, number=1, text="an alternative")
    earlier = NarratorDraft.objects.create(game_save=game_save, turn_id=last, player_input="z")

    output = load("--no-embed")

    for model in (Event, RecordedQuery, NarratorSnapshot, LoreActivation, NarratorDraft):
        assert list(model.objects.filter(game_save=game_save).filter(turn_id__gt=last)) == [], model.__name__
    assert not NarratorAlternative.objects.filter(draft__game_save=game_save).exists()
    # What belongs to the demo's own turns stays.
    assert RecordedQuery.objects.get(game_save=game_save).query_text == f"query at {last}"
    assert NarratorSnapshot.objects.get(game_save=game_save).turn_id == last
    assert LoreActivation.objects.filter(game_save=game_save).count() == last
    assert NarratorDraft.objects.get(game_save=game_save) == earlier
    assert "turns: " in output and "1 removed" in output
    assert "narrator records after the last demo turn: 3 removed" in output


@pytest.mark.django_db
def test_the_trim_is_the_registrys_rewind_and_carries_the_jobs_of_the_kept_turns():
    """The demo's trim moves the save to a new timeline generation with the jobs of its kept turns; those of
    the removed turns stay behind (they write nothing), as after the Rewind page's rewind."""
    from studio.memory.models import Job, JobKind

    load("--no-embed")
    game_save = demo_save()
    last, generation = game_save.current_turn, game_save.timeline_generation
    Event.objects.create(game_save=game_save, turn_id=last + 1, player_input="x", narrative="y")
    kept, dropped = (
        Job.objects.create(
            kind=JobKind.EMBED_TURN,
            universe_id=game_save.universe_id,
            game_save=game_save,
            turn_id=turn,
            timeline_generation=generation,
        )
        for turn in (last, last + 1)
    )
    load("--no-embed")
    game_save.refresh_from_db()
    assert (game_save.current_turn, game_save.timeline_generation) == (last, generation + 1)
    kept.refresh_from_db()
    dropped.refresh_from_db()
    assert (kept.timeline_generation, dropped.timeline_generation) == (generation + 1, generation)


@pytest.mark.django_db
def test_if_missing_keeps_an_existing_demo():
    load("--no-embed")
    LoreEntry.objects.filter(entry_id="pim").update(title="Pim the Bold")
    output = load("--no-embed", "--if-missing")
    assert "already exists" in output
    assert LoreEntry.objects.get(entry_id="pim").title == "Pim the Bold"


@pytest.mark.django_db
def test_a_save_id_taken_by_another_universe_is_an_error():
    other = Universe.objects.create(name="Other", slug="other")
    Save.objects.create(universe=other, save_id=SAVE_ID, name="squatter")
    with pytest.raises(CommandError, match="another universe"):
        load("--no-embed")
    assert not Universe.objects.filter(slug=SLUG).exists()  # all or nothing


def test_broken_files_are_reported(tmp_path):
    universe = json.loads(UNIVERSE_FILE.read_text(encoding="utf-8"))
    universe["lore"][0]["links"].append("no-such-entry")
    broken = tmp_path / "universe.json"
    broken.write_text(json.dumps(universe), encoding="utf-8")
    with pytest.raises(DemoDataError, match="no-such-entry"):
        demo_read(universe_path=broken, save_path=SAVE_FILE)

    lines = SAVE_FILE.read_text(encoding="utf-8").splitlines()
    gap = tmp_path / "save.jsonl"
    gap.write_text("\n".join(lines[:3] + lines[4:]), encoding="utf-8")
    with pytest.raises(DemoDataError, match="expected 4"):
        demo_read(universe_path=UNIVERSE_FILE, save_path=gap)


@pytest.fixture(params=[True, False], ids=["batch-api", "one-by-one"])
def fake_vector(monkeypatch, request):
    """The shared fake store, with or without the batch interface (`embed_chunks`,
    `get_chunks`), as the whole `studio.memory.vector` module the loader imports."""
    memory = FakeVectorMemory(batch_api=request.param)
    module = types.ModuleType("studio.memory.vector")
    module.get_vector_memory = lambda: memory
    monkeypatch.setitem(sys.modules, "studio.memory.vector", module)
    yield memory
    # Lore goes to the store with what link expansion and the Lore Book search need.
    assert all(
        {"entry_id", "text", "title", "links"} <= set(e)
        for _n, _scope, entries in memory.named("sync_lore")
        for e in entries
    )


@pytest.mark.django_db
def test_embeds_turns_and_lore_once(fake_vector):
    output = load()
    universe = Universe.objects.get(slug=SLUG)
    n_turns = demo_save().events.count()
    n_lore = universe.lore_entries.count()
    assert fake_vector.embed_calls == n_turns
    assert fake_vector.count(SAVE_ID) == n_turns + n_lore
    assert fake_vector.count(universe.lore_scope_id) == n_lore
    assert not universe.lore_entries.exclude(embedding_state=EmbeddingState.EMBEDDED).exists()
    assert f"embedded {n_turns} turns" in output

    output = load()
    assert fake_vector.embed_calls == n_turns  # nothing embedded twice
    assert output.count("already embedded") == 2

    fake_vector.rollback(SAVE_ID, 10)  # chunks lost, e.g. an interrupted earlier run
    load()
    assert fake_vector.count(SAVE_ID) == n_turns + n_lore
    assert fake_vector.embed_calls == 2 * n_turns


@pytest.mark.django_db
def test_no_embed_never_touches_the_vector_store(fake_vector):
    load("--no-embed")
    assert fake_vector.chunks == [] and fake_vector.sync_calls == []


@pytest.mark.django_db
def test_missing_vector_module_is_a_note_not_a_failure(monkeypatch):
    monkeypatch.setitem(sys.modules, "studio.memory.vector", None)  # import raises ImportError
    output = load()
    assert "Embedding skipped: the vector store is unavailable" in output
    assert demo_save().events.count() >= 40


@pytest.mark.django_db
def test_changed_content_is_embedded_again(fake_vector):
    load()
    calls = fake_vector.embed_calls
    Event.objects.filter(game_save=demo_save(), turn_id=7).update(narrative="Rewritten by hand.")
    output = load()
    assert "1 updated" in output
    assert fake_vector.embed_calls == calls + demo_save().events.count()

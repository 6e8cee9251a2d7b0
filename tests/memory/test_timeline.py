"""The timeline registry: every per-turn model is registered (or declared exempt), once."""

from __future__ import annotations

import dataclasses

import pytest
from django.db import models
from django.test.utils import isolate_apps

from studio.memory import timeline
from studio.memory.models import Fact
from studio.saves.models import NarratorSnapshot
from studio.world.models import Event, Save
from studio.saves.portable import registered_sections


def test_every_per_turn_model_is_registered():
    """A new model with a turn column (or a foreign key to a per-turn table) fails here
    until its app registers it in `ready()` (`timeline.register_table`) or declares it
    exempt with a reason (`timeline.exempt_model`)."""
    missing = timeline.unregistered_models()
    assert not missing, (
        "register these per-turn models in the timeline registry (studio/memory/timeline.py): "
        + ", ".join(m._meta.label for m in missing)
    )


def test_the_check_sees_a_table_that_is_not_registered():
    entry = timeline.table("narrator_snapshots")
    timeline.unregister_table("narrator_snapshots")
    try:
        assert timeline.unregistered_models() == [NarratorSnapshot]
    finally:
        timeline.register_table(entry)
    assert timeline.unregistered_models() == []


@isolate_apps("studio.saves")
def test_the_check_sees_turn_ranges_and_links_to_per_turn_rows():
    class Chapter(models.Model):
        game_save = models.ForeignKey(Save, on_delete=models.CASCADE)
        first_turn = models.PositiveIntegerField()
        last_turn = models.PositiveIntegerField()

        class Meta:
            app_label = "saves"

    class Reveal(models.Model):
        event = models.ForeignKey(Event, on_delete=models.CASCADE)

        class Meta:
            app_label = "saves"

    class Note(models.Model):
        game_save = models.ForeignKey(Save, on_delete=models.CASCADE)
        text = models.TextField()

        class Meta:
            app_label = "saves"

    assert timeline.unregistered_models([Chapter, Reveal, Note]) == [Chapter, Reveal]


def test_registered_tables_run_in_one_order_and_name_their_save_file_section():
    names = [t.name for t in timeline.registered_tables()]
    assert names == [
        "events",
        "states",
        "presence",
        "facts",
        "reveals",
        "beliefs",
        "mental_models",
        "recorded_queries",
        "lore_activations",
        "chapters",
        "narrator_snapshots",
        "continuity_findings",
        "narrator_drafts",
        "memory_test_results",
    ]
    sections = {s.name for s in registered_sections()}
    for entry in timeline.registered_tables():
        assert entry.section is None or entry.section in sections, entry.name
        if entry.section is None or entry.copy is None:
            assert entry.note, f"{entry.name} must say why it is not forked or not in the save file"


def test_a_table_left_out_of_forks_or_files_must_say_why():
    with pytest.raises(ValueError, match="say why"):
        timeline.TurnTable.plain("chapters", Fact, order=5, section=None)
    with pytest.raises(ValueError, match="lower-case"):
        timeline.TurnTable.plain("Chapters", Fact, order=5, section="facts")


def test_a_model_or_name_registers_once():
    facts = timeline.table("facts")
    with pytest.raises(ValueError, match="already registered"):
        timeline.register_table(dataclasses.replace(facts, order=1))
    with pytest.raises(ValueError, match="already registered as timeline table 'facts'"):
        timeline.register_table(dataclasses.replace(facts, name="facts_again"))
    assert timeline.register_table(facts) is facts  # the same entry again is no change
    with pytest.raises(KeyError, match="no timeline table 'presence_rows'"):
        timeline.table("presence_rows")


def test_exempt_models_say_why():
    exempt = timeline.exempt_models()
    assert {m._meta.label for m in exempt} == {
        "world.Save",
        "saves.NarratorAlternative",
        "memory.Job",
        "universes.MemoryTest",
    }
    assert all(reason.strip() for reason in exempt.values())
    with pytest.raises(ValueError, match="say why"):
        timeline.exempt_model(Fact, reason=" ")


def test_a_fork_copy_that_needs_ids_not_copied_yet_is_a_clear_error():
    ctx = timeline.ForkContext(source=None, fork=None, target_turn=3)
    with pytest.raises(LookupError, match="has not copied 'facts' yet"):
        ctx.ids_of("facts")


def test_every_count_has_a_label():
    labels = timeline.count_labels()
    assert labels["events"] == "Turns (events)" and labels["beliefs_updated"] == "Beliefs rolled back"
    assert "narrator_drafts" not in labels  # drafts roll back uncounted


def test_every_registry_is_an_extension_point_of_the_hooks_module():
    from studio.memory import hooks
    from studio.memory.jobs import registry as job_registry
    from studio.saves.portable import registry as section_registry

    used = {
        "turn_tables": timeline._TABLES,
        "exempt_models": timeline._EXEMPT,
        "job_kinds": job_registry._handlers,
        "save_file_sections": section_registry._SECTIONS,
    }
    assert set(used) == {point.name for point in hooks.EXTENSION_POINTS}
    for name, registry in used.items():
        assert registry is hooks.extension_point(name) and isinstance(registry, hooks.Registry), name
    with pytest.raises(KeyError, match="not an extension point"):
        hooks.extension_point("turn_table")


def test_a_registry_takes_a_name_once_and_runs_in_order_then_name():
    from studio.memory import hooks

    @dataclasses.dataclass(frozen=True)
    class Entry:
        name: str
        order: int

    registry = hooks.Registry("examples")
    late, early, tie = Entry("late", 9), Entry("early", 1), Entry("also_late", 9)
    for entry in (late, early, tie):
        assert registry.register(entry) is entry
    assert registry.register(Entry("late", 9)) == late  # the same entry again is no change
    with pytest.raises(ValueError, match="'late' is already registered"):
        registry.register(Entry("late", 2))
    assert [e.name for e in registry] == ["early", "also_late", "late"]
    registry.register(Entry("late", 0), replace=True)
    assert [e.name for e in registry] == ["late", "early", "also_late"]
    registry.unregister("late")
    assert "late" not in registry and len(registry) == 2


def test_the_save_file_runs_on_the_tables_order_scale():
    """A section carrying per-turn tables runs at their (lowest) order; the others interleave on the same scale."""
    orders = {s.name: s.order for s in registered_sections()}
    for entry in timeline.registered_tables():
        if entry.section is not None:
            assert orders[entry.section] == min(
                t.order for t in timeline.registered_tables() if t.section == entry.section
            )
    assert [s.name for s in registered_sections()] == [
        "turns",
        "presence",
        "facts",
        "reveals",
        "beliefs",
        "mental_models",
        "jobs",
        "llm_calls",
        "recorded_queries",
        "lore_activation",
        "chapters",
        "narrator_snapshots",
        "play_settings",
        "continuity_findings",
        "memory_test_results",
    ]


def test_a_fork_copies_rows_by_their_columns_never_a_hand_kept_list():
    """Every table a fork carries is copied by `copy_columns` (every concrete column, declared remaps), but the
    three whose rows a fork rolls back to N first: those copy whole rows (every column) with their rollback rule."""
    tables = timeline.registered_tables()
    derived = {t.name for t in tables if getattr(t.copy, "turn_field", None)}
    not_copied = {t.name for t in tables if t.copy is None}
    assert {t.name for t in tables} - derived - not_copied == {"facts", "beliefs", "mental_models"}
    assert not_copied == {"recorded_queries", "narrator_drafts"}

"""Save files: export is deterministic, import is checked whole and all or nothing, and the
export of an imported save is byte for byte the file it came from."""

from __future__ import annotations

import gzip
import json

import pytest
from django.db import connection

from studio.memory.models import Job, JobKind, JobStatus, LLMCall, Observation
from studio.saves import portable
from studio.saves.checkpoints import CheckpointManager
from studio.world.models import Event, LoreEntry, Save, StateCache, Universe
from studio.saves.portable import codec
from studio.saves.portable.registry import ExportContext, SaveSection

from .portable_support import T0, rich_save, table_counts
from .scenario import snapshot
from tests.fakes import FakeVectorMemory

pytestmark = pytest.mark.django_db


def export_bytes(save, **kwargs) -> bytes:
    return portable.save_export(game_save=save, **kwargs).read()


def document_of(save) -> dict:
    return json.loads(export_bytes(save))


def refused(data: bytes, universe) -> portable.SaveFileError:
    """Import `data`, expect a refusal, and check that nothing at all was written."""
    before = table_counts()
    with pytest.raises(portable.SaveFileError) as error:
        portable.save_import(universe=universe, data=data)
    assert table_counts() == before
    return error.value


def encoded(document: dict) -> bytes:
    return json.dumps(document).encode()


# -- export ----------------------------------------------------------------------------------


def test_export_is_deterministic_canonical_and_free_of_database_ids(universe):
    save = rich_save(universe)
    first, second = export_bytes(save), export_bytes(save)
    assert first == second
    assert codec.encode_document(json.loads(first)).encode() == first  # the canonical form
    text = first.decode()
    assert save.save_id not in text and "axiom-save" in text
    document = json.loads(first)
    assert list(document) == ["format", "format_version", "universe", "save", "sections"]
    assert list(document["sections"]) == [s.name for s in portable.registered_sections()]
    assert document["save"] == {
        "name": "Rich run",
        "memory_mode": "living",
        "beliefs_enabled": True,
        "meta": {"belief_mission": "Remember debts.", "tone": "grim"},
        "current_turn": 4,
        "timeline_generation": 1,
        "last_activity_at": "2025-03-14T10:26:53.589793Z",
    }
    assert document["universe"]["slug"] == "test-world"
    assert document["universe"]["lore_hash"] == portable.universe_lore_hash(universe=universe)
    items = {name: body["items"] for name, body in document["sections"].items()}
    assert [t["turn_id"] for t in items["turns"]] == [1, 2, 3, 4]
    assert (
        items["turns"][3]["narrative"] == "Ivo arrives — «bonjour» 🚢" and "«bonjour» 🚢" in text
    )  # UTF-8, not escaped
    assert items["turns"][0]["state"] == {"gold": 3, "turn": 1}
    # File-local ids 1..n, facts in turn order; the rewound turn 4's fact is gone.
    assert [(f["id"], f["turn_id"]) for f in items["facts"]] == [(1, 1), (2, 1), (3, 2), (4, 3), (5, 4)]
    assert [b["id"] for b in items["beliefs"]] == [1, 2, 3]
    debt, flood, ivo = items["beliefs"]
    assert debt["sources"] == [{"fact_id": 1, "turn_id": 1}, {"fact_id": 3, "turn_id": 2}]
    assert [h["action"] for h in debt["history"]] == ["CREATE", "UPDATE"]
    assert flood["deleted_turn_id"] == 3  # the tombstone travels
    assert ivo["sources"] == [{"fact_id": 5, "turn_id": 4}]
    kael = next(m for m in items["mental_models"] if m["subject"] == "Kaël")
    assert kael["sources"] == [1, 2] and [v["turn_id"] for v in kael["versions"]] == [2, 3]
    # Finished jobs only, none of the vector store's, renumbered; the in-flight ones stay home.
    assert [(j["id"], j["kind"], j["status"], j["timeline_generation"]) for j in items["jobs"]] == [
        (1, "living_turn", "done", 1),
        (2, "living_turn", "done", 0),
        (3, "embed_turn", "failed", 0),
        (4, "refresh_models", "skipped", 1),
    ]
    assert Job.objects.filter(game_save=save, status__in=["queued", "running"]).exists()
    assert [(c["job_id"], c["created_at"]) for c in items["llm_calls"]] == [
        (1, "2025-03-14T09:26:53.589793Z"),
        (None, "2025-03-14T09:26:53.589793Z"),
    ]
    assert items["recorded_queries"][0]["result_ids"] == ["lore:kael", "chunk:c3"]


def test_export_of_the_same_content_on_another_save_gives_the_same_file(universe):
    save = rich_save(universe)
    data = export_bytes(save)
    copy = portable.save_import(universe=universe, data=data).game_save
    again = portable.save_import(universe=universe, data=export_bytes(copy)).game_save
    assert len({save.save_id, copy.save_id, again.save_id}) == 3
    assert export_bytes(again) == data


def test_gzip_export_is_deterministic_and_imports_like_the_plain_file(universe):
    save = rich_save(universe)
    packed = portable.save_export(game_save=save, compress=True)
    assert packed.filename == "rich-run-turn-4.axiom-save.json.gz" and packed.content_type == "application/gzip"
    data = packed.read()
    assert data[:2] == b"\x1f\x8b" and data == export_bytes(save, compress=True)
    assert gzip.decompress(data) == export_bytes(save)
    imported = portable.save_import(universe=universe, data=data).game_save
    assert export_bytes(imported) == export_bytes(save)


# -- the round trip --------------------------------------------------------------------------


def test_imported_save_equals_the_original_and_exports_the_same_bytes(universe):
    save = rich_save(universe)
    data = export_bytes(save)
    result = portable.save_import(universe=universe, data=data)
    imported = Save.objects.get(pk=result.game_save.pk)
    assert imported.save_id != save.save_id and imported.forked_from is None
    assert export_bytes(imported) == data
    assert snapshot(imported) == snapshot(save)
    assert result.warnings == []
    assert result.counts == {
        "turns": 4,
        "facts": 5,
        "beliefs": 3,
        "mental_models": 2,
        "jobs": 4,
        "llm_calls": 2,
        "recorded_queries": 1,
        "lore_activation": 0,
        "chapters": 0,
        "narrator_snapshots": 0,
        "presence": 0,
        "reveals": 0,
        "play_settings": 0,
        "continuity_findings": 0,
        "memory_test_results": 0,
    }
    for field in (
        "name",
        "memory_mode",
        "beliefs_enabled",
        "meta",
        "current_turn",
        "timeline_generation",
        "last_activity_at",
    ):
        assert getattr(imported, field) == getattr(save, field), field
    assert list(imported.events.order_by("turn_id").values_list("created_at", flat=True)) == list(
        save.events.order_by("turn_id").values_list("created_at", flat=True)
    )
    assert set(LLMCall.objects.filter(game_save=imported).values_list("created_at", flat=True)) == {T0}
    call = LLMCall.objects.get(game_save=imported, operation="extract")
    assert call.job.game_save_id == imported.pk and call.job.llm_tokens == 345
    # The derived columns bulk inserts skip are filled.
    belief = Observation.all_objects.get(game_save=imported, statement="Kaël repays his debt slowly")
    assert (belief.subject_key, belief.proof_count, belief.last_source_turn) == ("kaël", 2, 2)
    assert imported.facts.get(statement="Kaël owes Mira ten crowns").entity_index == "\x1fkaël\x1fmira\x1f"


def test_a_rewind_of_the_imported_save_equals_the_same_rewind_of_the_original(universe):
    save = rich_save(universe)
    imported = portable.save_import(universe=universe, data=export_bytes(save)).game_save
    vector = FakeVectorMemory()
    for target in (2, 1):  # turn 2 brings the retired belief back from its tombstone
        CheckpointManager(vector_memory=vector).rewind(save, target)
        CheckpointManager(vector_memory=vector).rewind(imported, target)
        assert snapshot(imported) == snapshot(save)
        assert export_bytes(imported) == export_bytes(save)
    assert Observation.objects.filter(game_save=imported, statement="The harbour floods").exists()


def test_import_renames_and_targets_another_universe_with_warnings(universe, author):
    save = rich_save(universe)
    other = Universe.objects.create(name="Other World", slug="other-world", owner=author)
    result = portable.save_import(universe=other, data=export_bytes(save), name="  Bug #12  ")
    assert result.game_save.universe == other and result.game_save.name == "Bug #12"
    assert len(result.warnings) == 2
    assert "Test World" in result.warnings[0] and "other-world" in result.warnings[0]
    assert "Lore Book" in result.warnings[1]
    document = document_of(result.game_save)
    assert document["universe"]["slug"] == "other-world" and document["save"]["name"] == "Bug #12"


def test_a_changed_lore_book_is_warned_about(universe):
    save = rich_save(universe)
    data = export_bytes(save)
    LoreEntry.objects.filter(universe=universe, entry_id="kael").update(text="Kaël is a pirate now.")
    result = portable.save_import(universe=universe, data=data)
    assert [w for w in result.warnings if "Lore Book" in w]


def test_import_queues_the_embeddings_and_lore_sync_on_commit(
    universe, eager_jobs, fake_vectors, django_capture_on_commit_callbacks
):
    vectors = fake_vectors
    save = rich_save(universe)
    data = export_bytes(save)
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        result = portable.save_import(universe=universe, data=data)
    imported = result.game_save
    assert result.jobs_queued == 5 and callbacks  # lore sync + one embedding per turn, handed over on commit
    assert vectors.calls == []  # nothing ran before the commit
    for callback in callbacks:
        callback()
    assert vectors.texts(imported.save_id) == {e.turn_id: [e.narrative] for e in imported.events.all()}
    assert [c[1] for c in vectors.named("sync_lore")] == [imported.save_id]
    rederived = Job.objects.filter(game_save=imported, payload__rederive="save_import")
    assert rederived.count() == 5 and set(rederived.values_list("status", flat=True)) == {JobStatus.DONE}
    assert export_bytes(imported) == data  # the rebuilt vectors' jobs are not part of the save


def test_an_empty_save_round_trips(universe):
    save = Save.objects.create(universe=universe, name="Empty")
    data = export_bytes(save)
    result = portable.save_import(universe=universe, data=data)
    assert result.game_save.current_turn == 0 and result.jobs_queued == 1
    assert export_bytes(result.game_save) == data


# -- malformed files -------------------------------------------------------------------------


@pytest.fixture
def exported(universe) -> dict:
    return document_of(rich_save(universe))


def items(document, section):
    return document["sections"][section]["items"]


def test_a_truncated_file_is_refused(universe, exported):
    data = encoded(exported)
    error = refused(data[: len(data) // 2], universe)
    assert "truncated" in str(error) and "line 1 column" in error.problems[0].location
    original = export_bytes(Save.objects.get(name="Rich run"))
    error = refused(original[:-5], universe)
    assert "not valid JSON" in str(error)
    inside_a_string = original[: original.index("Kaël borrows".encode()) + 6]
    assert "truncated" in str(refused(inside_a_string, universe))


def test_a_truncated_gzip_file_is_refused(universe):
    data = export_bytes(rich_save(universe), compress=True)
    error = refused(data[:-12], universe)
    assert "truncated" in str(error) or "damaged" in str(error)


def test_a_wrong_format_name_or_version_is_refused(universe, exported):
    error = refused(encoded({**exported, "format": "sillytavern-chat"}), universe)
    assert error.problems[0].location == "format" and "not an Axiom save file" in str(error)
    error = refused(encoded({**exported, "format_version": 2}), universe)
    assert error.problems[0].location == "format_version" and "newer studio" in str(error)
    error = refused(encoded({**exported, "format_version": "1"}), universe)
    assert error.problems[0].location == "format_version"


@pytest.mark.parametrize(
    "data, message",
    [
        (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", "not UTF-8"),
        (b"player_input,narrative\nlook,fog\n", "not valid JSON"),
        (b"", "empty"),
        (b"[1, 2, 3]", "JSON object"),
        (b'{"format": "axiom-save", "format": "axiom-save"}', "appears twice"),
        (b'{"x": NaN}', "not a JSON number"),
        (b"[" * 100_000 + b"]" * 100_000, "nested"),
    ],
)
def test_a_file_that_is_not_a_save_file_is_refused(universe, data, message):
    assert message in str(refused(data, universe))


def test_colliding_ids_are_refused(universe, exported):
    items(exported, "facts")[1]["id"] = 1
    items(exported, "beliefs")[2]["id"] = 2
    error = refused(encoded(exported), universe)
    assert "sections.facts.items[1].id: id 1 is used twice in facts" in error.errors
    assert "sections.beliefs.items[2].id: id 2 is used twice in beliefs" in error.errors


def test_turns_out_of_order_or_missing_are_refused(universe, exported):
    turns = items(exported, "turns")
    turns[1], turns[2] = turns[2], turns[1]
    error = refused(encoded(exported), universe)
    assert error.errors[0] == (
        "sections.turns.items[1].turn_id: turns must be numbered 1, 2, 3… in order: expected turn 2 here, found turn 3"
    )
    del turns[3]
    error = refused(encoded(exported), universe)
    assert any("holds 3 turns but save.current_turn is 4" in e for e in error.errors)


def test_rows_at_turns_that_do_not_exist_are_refused(universe, exported):
    items(exported, "facts")[0]["turn_id"] = 9
    items(exported, "mental_models")[0]["versions"][0]["turn_id"] = 5
    items(exported, "recorded_queries")[0]["turn_id"] = -1
    errors = refused(encoded(exported), universe).errors
    assert "sections.facts.items[0].turn_id: turn 9 does not exist: the save's turns are 0..4" in errors
    assert (
        "sections.mental_models.items[0].versions[0].turn_id: turn 5 does not exist: the save's turns are 0..4"
        in errors
    )
    assert any(e.startswith("sections.recorded_queries.items[0].turn_id: must be between 0") for e in errors)


def test_references_that_point_nowhere_are_refused(universe, exported):
    items(exported, "beliefs")[0]["sources"][0]["fact_id"] = 999
    items(exported, "beliefs")[0]["history"][0]["sources_added"][0]["turn_id"] = 3
    items(exported, "mental_models")[0]["sources"].append(77)
    items(exported, "llm_calls")[0]["job_id"] = 40
    errors = refused(encoded(exported), universe).errors
    assert (
        "sections.beliefs.items[0].sources[0].fact_id: points at fact 999, which is not in the file's facts" in errors
    )
    assert "sections.beliefs.items[0].history[0].sources_added[0].turn_id: is 3, but fact 1 is from turn 1" in errors
    assert any(e.startswith("sections.mental_models.items[0].sources[2]: points at belief 77") for e in errors)
    assert "sections.llm_calls.items[0].job_id: points at job 40, which is not in the file's jobs" in errors


def test_sections_that_break_the_save_rules_are_refused(universe, exported):
    items(exported, "mental_models")[1]["subject"] = "KAËL "
    items(exported, "jobs")[0]["status"] = "running"
    items(exported, "jobs")[1]["kind"] = "vector_rollback"
    items(exported, "jobs")[2]["timeline_generation"] = 9
    items(exported, "turns")[0]["surprise"] = 1
    del items(exported, "facts")[0]["why"]
    errors = refused(encoded(exported), universe).errors
    assert any("a save holds one per subject" in e for e in errors)
    assert any(e.startswith("sections.jobs.items[0].status: a running job is still in flight") for e in errors)
    assert any(e.startswith("sections.jobs.items[1].kind: vector_rollback jobs are not portable") for e in errors)
    assert any(e.startswith("sections.jobs.items[2].timeline_generation: generation 9 is after") for e in errors)
    assert any(e.startswith("sections.turns.items[0].surprise: is not a field") for e in errors)
    assert "sections.facts.items[0].why: is missing" in errors


def test_values_the_databases_cannot_store_are_refused(universe, exported):
    items(exported, "turns")[0]["narrative"] = "a\x00b"
    items(exported, "turns")[1]["state"] = {"hp": 123456789.25}
    items(exported, "facts")[0]["statement"] = "\ud800"
    text = json.dumps(exported).replace("123456789.25", "1e400")  # valid JSON that reads as infinity
    errors = refused(text.encode(), universe).errors
    assert "sections.turns.items[0].narrative: contains a NUL character, which cannot be stored" in errors
    assert any("sections.turns.items[1].state.hp: is a number too large" in e for e in errors)
    assert any("sections.facts.items[0].statement: contains a lone UTF-16 surrogate" in e for e in errors)


def test_sizes_are_bounded(universe, exported, settings):
    data = encoded(exported)
    settings.AXIOM_SAVE_FILE_MAX_BYTES = len(data) - 1
    error = refused(data, universe)
    assert isinstance(error, portable.SaveFileTooLarge) and "limit" in str(error)
    settings.AXIOM_SAVE_FILE_MAX_BYTES = 1024 * 1024
    bomb = gzip.compress(b" " * (4 * 1024 * 1024))  # 4 MiB of spaces in about 4 KB
    assert len(bomb) < 10_000
    error = refused(bomb, universe)
    assert isinstance(error, portable.SaveFileTooLarge) and "decompresses to more than 1048576 bytes" in str(error)
    items(exported, "turns")[0]["player_input"] = "x" * 20_001
    assert "is 20,001 characters long; at most 20,000" in str(refused(encoded(exported), universe))


def test_every_problem_is_listed_up_to_a_cap(universe, exported):
    for fact in items(exported, "facts"):
        fact["turn_id"] = 99
    for belief in items(exported, "beliefs"):
        belief["stale"] = "yes"
    error = refused(encoded(exported), universe)
    assert len([e for e in error.errors if "turn 99 does not exist" in e]) == 5
    assert len([e for e in error.errors if e.endswith(".stale: must be true or false, not the string 'yes'")]) == 3
    many = {
        **exported,
        "sections": {**exported["sections"], "facts": {**exported["sections"]["facts"], "items": [{"id": 0}] * 200}},
    }
    error = refused(encoded(many), universe)
    assert len(error.problems) == portable.LIMITS.max_problems + 1 and "stopped after 50 problems" in error.errors[-1]


# -- the section registry --------------------------------------------------------------------


NOTES: dict[int, list[dict]] = {}


def _notes_section(optional: bool) -> SaveSection:
    def export(ctx: ExportContext):
        fact_ids = ctx.file_ids["facts"]
        for note in NOTES.get(ctx.game_save.pk, []):
            yield {"turn_id": note["turn_id"], "text": note["text"], "fact_id": fact_ids[note["fact_pk"]]}

    def check(items, ctx, where):
        out = []
        for index, raw in enumerate(items):
            loc = f"{where}[{index}]"
            item = ctx.checker.record(
                raw,
                loc,
                {
                    "turn_id": lambda v, loc: ctx.turn(v, loc, first=1),
                    "text": lambda v, loc: ctx.checker.text(v, loc),
                    "fact_id": lambda v, loc: ctx.reference(v, loc, "facts", what="fact"),
                },
            )
            if item is not None and len(item) == 3:
                out.append(item)
        return out

    def load(items, ctx):
        NOTES[ctx.game_save.pk] = [
            {"turn_id": i["turn_id"], "text": i["text"], "fact_pk": ctx.db_ids["facts"][i["fact_id"]]} for i in items
        ]
        return len(items)

    return SaveSection("narrator_notes", 1, export, check, load, order=80, optional=optional)


@pytest.fixture
def notes_section():
    def register(optional: bool = False):
        return portable.register_section(_notes_section(optional), replace=True)

    yield register
    portable.unregister_section("narrator_notes")
    NOTES.clear()


def test_another_app_adds_a_section_without_editing_the_core(universe, notes_section):
    save = rich_save(universe)
    notes_section()
    fact = save.facts.order_by("turn_id", "id")[2]
    NOTES[save.pk] = [{"turn_id": 2, "text": "The narrator saw the payment.", "fact_pk": fact.pk}]
    data = export_bytes(save)
    section = json.loads(data)["sections"]["narrator_notes"]
    assert section == {
        "version": 1,
        "optional": False,
        "items": [{"fact_id": 3, "text": "The narrator saw the payment.", "turn_id": 2}],
    }
    imported = portable.save_import(universe=universe, data=data).game_save
    assert NOTES[imported.pk][0]["fact_pk"] == imported.facts.get(statement=fact.statement).pk
    assert export_bytes(imported) == data
    # The section's references are checked like the core's.
    document = json.loads(data)
    document["sections"]["narrator_notes"]["items"][0]["fact_id"] = 12
    assert "sections.narrator_notes.items[0].fact_id: points at fact 12" in str(refused(encoded(document), universe))


def test_an_unknown_section_is_refused_unless_marked_optional(universe, notes_section):
    save = rich_save(universe)
    notes_section(optional=False)
    strict = export_bytes(save)
    notes_section(optional=True)
    lenient = export_bytes(save)
    portable.unregister_section("narrator_notes")  # a studio without the app
    error = refused(strict, universe)
    assert (
        error.problems[0].location == "sections.narrator_notes" and "not marked optional" in error.problems[0].message
    )
    result = portable.save_import(universe=universe, data=lenient)
    assert result.warnings == [
        "The file's section “narrator_notes” is unknown to this studio and marked optional; it was left out."
    ]


def test_a_file_from_before_a_section_existed_imports_it_empty(universe, notes_section):
    save = rich_save(universe)
    data = export_bytes(save)  # no narrator_notes yet
    notes_section()
    imported = portable.save_import(universe=universe, data=data).game_save
    assert NOTES.get(imported.pk, []) == []
    document = json.loads(data)
    del document["sections"]["facts"]
    assert "sections.facts: is missing" in refused(encoded(document), universe).errors


def test_section_names_and_registrations_are_checked():
    with pytest.raises(ValueError):
        SaveSection("Bad Name", 1, list, list, list)
    with pytest.raises(ValueError):
        portable.register_section(SaveSection("turns", 2, list, list, list))


def test_the_database_backend_round_trips(universe):
    """Runs on whichever database the suite uses (the CI runs it on SQLite and PostgreSQL)."""
    save = rich_save(universe)
    data = export_bytes(save)
    assert export_bytes(portable.save_import(universe=universe, data=data).game_save) == data
    assert connection.vendor in {"sqlite", "postgresql"}
    assert StateCache.objects.filter(game_save=save).count() == Event.objects.filter(game_save=save).count() == 4


def test_a_save_played_through_the_living_pipeline_round_trips(
    living_universe, eager_jobs, fake_vectors, llm_server, django_capture_on_commit_callbacks
):
    """Facts, beliefs, models, jobs and LLM calls written by the real jobs (scripted LLM server)."""
    from studio.saves.services import save_create, turn_append

    with django_capture_on_commit_callbacks(execute=True):
        save = save_create(universe=living_universe, name="Played", memory_mode="living")
    for text in ("Kaël pays the harbour master and spits at the Guild.", "Kaël sails at dawn."):
        with django_capture_on_commit_callbacks(execute=True):
            turn_append(game_save=save, player_input="look", narrative=text, state={"time": "Day 3"})
    assert Job.objects.filter(game_save=save, kind=JobKind.LIVING_TURN, status=JobStatus.DONE).count() == 2
    assert LLMCall.objects.filter(game_save=save).exists() and save.facts.exists() and save.mental_models.exists()
    data = export_bytes(save)
    document = json.loads(data)
    assert {j["kind"] for j in items(document, "jobs")} == {"sync_lore", "embed_turn", "living_turn"}
    assert all(c["job_id"] for c in items(document, "llm_calls"))
    with django_capture_on_commit_callbacks(execute=True):
        imported = portable.save_import(universe=living_universe, data=data).game_save
    assert snapshot(imported) == snapshot(save)
    assert export_bytes(imported) == data
    assert fake_vectors.texts(imported.save_id) == fake_vectors.texts(save.save_id)


def test_a_chapter_with_an_unknown_close_reason_is_refused_with_the_checkers_message(universe, exported):
    chapter = {
        "level": 0,
        "first_turn": 1,
        "last_turn": 1,
        "closed_turn": 1,
        "close_reason": "boredom",
        "close_note": "",
        "story_time_start": "",
        "story_time_end": "",
        "summary": "",
        "summary_status": "done",
        "summary_error": "",
        "summary_model": "",
        "edited": False,
        "generated_summary": "",
    }
    exported["sections"].setdefault("chapters", {"version": 1, "optional": True, "items": []})
    items(exported, "chapters").append(chapter)
    error = refused(encoded(exported), universe)
    assert any(
        p.location.endswith("close_reason") and p.message.startswith("must be one of playtester")
        for p in error.problems
    ), error.problems

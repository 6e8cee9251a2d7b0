"""The demo's living save: recorded memory imported by load_demo, idempotently and without an LLM."""

from __future__ import annotations

import io
import json

import pytest
from django.core import serializers
from django.core.management import call_command
from django.test import override_settings
from django.urls import reverse
from django.utils.html import escape

from studio.memory.models import Fact, Job, LLMCall, MentalModel, Observation
from studio.world.models import Event, Save, StateCache
from studio.saves import demo_living as living
from tests.llm_server import Reply, ScriptedLLMServer

DEMO_SAVE_ID = "drowned-reach-demo"


def load(*args: str) -> str:
    out = io.StringIO()
    call_command("load_demo", *args, stdout=out)
    return out.getvalue()


def provenance() -> dict:
    return json.loads(living.PROVENANCE_FILE.read_text(encoding="utf-8"))


def living_rows() -> dict[str, list]:
    """Every row of the living demo save, serialized with pks and timestamps."""
    save = Save.objects.get(save_id=living.DEMO_LIVING_SAVE_ID)
    rows = {"Save": serializers.serialize("python", Save.objects.filter(pk=save.pk))}
    for model, manager in (
        (Event, Event.objects),
        (StateCache, StateCache.objects),
        (Fact, Fact.objects),
        (Observation, Observation.all_objects),
        (MentalModel, MentalModel.objects),
        (Job, Job.objects),
        (LLMCall, LLMCall.objects),
    ):
        rows[model.__name__] = serializers.serialize("python", manager.filter(game_save=save).order_by("pk"))
    return rows


def test_the_recording_is_in_the_repository_and_says_what_made_it():
    data = provenance()
    assert data["model"] and data["endpoint_kind"] and data["recorded_to"]
    assert data["turns_recorded"] >= 1
    assert len(data["turns"]) == data["turns_recorded"]
    exchanges = [json.loads(line) for line in living.EXCHANGES_FILE.read_text(encoding="utf-8").splitlines() if line]
    assert len(exchanges) == data["counts"]["llm_exchanges"]
    answered = [e for e in exchanges if e["status"] == 200]
    assert answered and all(e["request"].get("messages") for e in answered)
    assert all(e["content"] for e in answered)


@pytest.mark.django_db
def test_load_demo_creates_the_living_save_with_the_recorded_memory():
    output = load("--no-embed")
    data = provenance()
    save = Save.objects.get(save_id=living.DEMO_LIVING_SAVE_ID)
    assert save.is_living and save.universe.slug == "the-drowned-reach"
    assert save.current_turn == data["turns_recorded"]
    assert save.events.count() == data["turns_recorded"]
    counts = data["counts"]
    assert Fact.objects.filter(game_save=save).count() == counts["facts"] > 0
    assert Observation.all_objects.filter(game_save=save).count() == counts["beliefs"]
    assert MentalModel.objects.filter(game_save=save).count() == counts["mental_models"]
    assert LLMCall.objects.filter(game_save=save).count() == counts["llm_calls"] > 0
    assert f"living demo save 'demo-living': created (recorded with {data['model']}" in output
    # The classic demo save is still there, untouched by the living one.
    assert Save.objects.get(save_id=DEMO_SAVE_ID).events.count() >= 40


@pytest.mark.django_db
def test_loading_twice_changes_nothing():
    load("--no-embed")
    before = living_rows()
    output = load("--no-embed")
    assert "living demo save 'demo-living': unchanged" in output
    assert living_rows() == before


@pytest.mark.django_db
def test_a_played_on_living_save_is_restored_to_the_recording():
    load("--no-embed")
    save = Save.objects.get(save_id=living.DEMO_LIVING_SAVE_ID)
    expected = Fact.objects.filter(game_save=save).count()
    Fact.objects.filter(game_save=save).order_by("pk").first().delete()
    output = load("--no-embed")
    assert "living demo save 'demo-living': replaced" in output
    restored = Save.objects.get(save_id=living.DEMO_LIVING_SAVE_ID)
    assert Fact.objects.filter(game_save=restored).count() == expected
    assert Save.objects.filter(save_id=living.DEMO_LIVING_SAVE_ID).count() == 1


@pytest.mark.django_db(transaction=True)
def test_loading_calls_no_llm(fake_vectors):
    """With an endpoint configured and jobs run inline, the load (and the embedding jobs the
    import queues) sends nothing to it: the memory comes from the file."""
    with (
        ScriptedLLMServer(lambda request: Reply(status=500)) as server,
        override_settings(AXIOM_LLM_BASE_URL=server.base_url, AXIOM_LLM_MODEL="test", AXIOM_JOBS_EAGER=True),
    ):
        load()
        save = Save.objects.get(save_id=living.DEMO_LIVING_SAVE_ID)
        assert server.requests == []
    assert LLMCall.objects.filter(game_save=save).count() == provenance()["counts"]["llm_calls"]


@pytest.mark.django_db
@pytest.mark.parametrize("name", ["memory:facts", "memory:beliefs", "memory:mental_models", "saves:detail"])
def test_pages_render_the_recorded_memory_and_say_which_model_made_it(client, staff_user, name):
    load("--no-embed")
    data = provenance()
    save = Save.objects.get(save_id=living.DEMO_LIVING_SAVE_ID)
    client.force_login(staff_user)
    html = client.get(reverse(name, args=[save.save_id])).content.decode()
    assert 'id="save-recorded-with"' in html
    assert f"recorded with {data['model']} on {data['recorded_to'][:10]}" in html
    if name == "memory:facts":
        assert "No facts match." not in html
        shown = [f for f in Fact.objects.filter(game_save=save) if escape(f.statement) in html]
        assert shown  # the page lists recorded facts (a page of them)
    if name == "memory:beliefs" and data["counts"]["beliefs"]:
        belief = Observation.objects.filter(game_save=save).order_by("pk").first()
        assert escape(belief.statement) in html
    if name == "memory:mental_models" and data["counts"]["mental_models"]:
        model = MentalModel.objects.filter(game_save=save).first()
        assert escape(model.subject) in html


@pytest.mark.django_db
def test_no_other_save_is_attributed_to_the_model(client, staff_user):
    load("--no-embed")
    client.force_login(staff_user)
    html = client.get(reverse("saves:detail", args=[DEMO_SAVE_ID])).content.decode()
    # The 48-turn save's line names only the model that summarised its chapters (test_demo_chapters.py).
    assert "Living memory recorded with" not in html and "remembered by whichever model" not in html
    fork = Save.objects.create(universe=Save.objects.get(save_id=DEMO_SAVE_ID).universe, name="Other")
    assert 'id="save-recorded-with"' not in client.get(reverse("saves:detail", args=[fork.save_id])).content.decode()


def test_partial_recordings_say_how_many_turns():
    summary = living.recording_summary(
        {"model": "M", "recorded_to": "2026-12-01T14:20:00+00:00", "turns_recorded": 12, "turns_requested": 20}
    )
    assert summary["text"] == "recorded with M on 2026-12-01 over the first 12 turns"
    full = living.recording_summary(
        {"model": "M", "recorded_to": "2026-12-01T14:20:00+00:00", "turns_recorded": 20, "turns_requested": 20}
    )
    assert full["text"] == "recorded with M on 2026-12-01 over 20 turns"
    assert living.recording_summary({"recorded_to": "2026-12-01"}) is None  # no model, no claim


@pytest.mark.django_db
def test_without_the_recording_the_living_save_is_skipped(tmp_path):
    from studio.world.models import Universe

    load("--no-embed")
    universe = Universe.objects.get(slug="the-drowned-reach")
    result = living.demo_living_load(
        universe=universe, save_path=tmp_path / "none.json", provenance_path=tmp_path / "none-provenance.json"
    )
    assert result.outcome == "missing"


def summarize_exchanges() -> list[dict]:
    """The recorded exchanges of the `summarize` operation (its system prompt), as received."""
    from studio.memory.chapters.summarize import SYSTEM_PROMPT

    opening = SYSTEM_PROMPT.split("{")[0]
    exchanges = [json.loads(line) for line in living.EXCHANGES_FILE.read_text(encoding="utf-8").splitlines() if line]
    return [e for e in exchanges if e["request"]["messages"][0]["content"].startswith(opening)]


@pytest.mark.django_db
def test_load_demo_gives_the_living_save_its_chapters_summarised_on_the_recorded_model(client, staff_user):
    from studio.memory.chapters.models import Chapter, ChapterCloseReason, SummaryStatus
    from studio.memory.llm.parsing import parse_json_payload

    load("--no-embed")
    recorded = provenance()["chapters"]
    assert recorded["model"] and recorded["endpoint_kind"] and recorded["recorded_to"]
    assert recorded["operation"] == "summarize" and len(recorded["prompt"]["sha256"]) == 64 and recorded["code_commit"]
    save = Save.objects.get(save_id=living.DEMO_LIVING_SAVE_ID)
    rows = list(Chapter.objects.filter(game_save=save).order_by("level", "first_turn"))
    assert [(r.level, r.first_turn, r.last_turn, r.closed_turn, r.close_reason) for r in rows] == [
        (x["level"], x["first_turn"], x["last_turn"], x["closed_turn"], x["close_reason"]) for x in recorded["rows"]
    ]
    chapters = [r for r in rows if r.level == 0]
    assert len(chapters) == recorded["counts"]["chapters"] >= 2
    # Closed by the studio's own rules (a scene change, the turn limit), arcs rolled up from them.
    assert {r.close_reason for r in chapters} <= {ChapterCloseReason.SCENE, ChapterCloseReason.LENGTH}
    assert all(r.close_reason == ChapterCloseReason.ROLLUP for r in rows if r.level > 0)
    # Every row has the model's summary (not an edit), and each is the answer recorded for it.
    assert all(r.summary_status == SummaryStatus.DONE and r.summary.strip() and not r.edited for r in rows)
    assert all(r.summary_model == recorded["served_model_id"] for r in rows)
    answers = {" ".join(str(parse_json_payload(e["content"])["summary"]).split()) for e in summarize_exchanges()}
    assert {r.summary for r in rows} <= answers
    assert (
        LLMCall.objects.filter(game_save=save, operation="summarize").count()
        == recorded["counts"]["llm_calls"]
        == len(rows)
    )
    # The Chapters page shows them, and says which model summarised them and when.
    client.force_login(staff_user)
    html = client.get(reverse("saves:chapters", args=[save.save_id])).content.decode()
    assert all(escape(r.summary) in html for r in rows)
    assert f"were recorded with {recorded['model']} on {recorded['recorded_to'][:10]}" in html


def test_the_chapters_line_names_the_summaries_model_only_when_the_recording_has_them():
    base = {"model": "M", "recorded_to": "2026-12-01T14:20:00+00:00", "turns_recorded": 20, "turns_requested": 20}
    assert living.recording_summary(base)["chapters_text"] == ""
    chapters = {"model": "S", "recorded_to": "2026-12-02T05:40:00+00:00", "counts": {"chapters": 4, "arcs": 1}}
    assert living.recording_summary({**base, "chapters": chapters})["chapters_text"] == (
        "The summaries of its 4 chapters and 1 arc were recorded with S on 2026-12-02."
    )
    assert living.recording_summary({**base, "chapters": {**chapters, "model": ""}})["chapters_text"] == ""

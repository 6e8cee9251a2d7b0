"""The 48-turn demo save's chapters (issue 30): load_demo gives it the chapters and summaries recorded
on a real model (studio/universes/demo/chapters/), idempotently, without an LLM, and says so."""

from __future__ import annotations

import io
import json

import pytest
from django.core.management import call_command
from django.urls import reverse
from django.utils.html import escape

from studio.memory.chapters.models import Chapter, ChapterCloseReason, SummaryStatus
from studio.memory.llm.parsing import parse_json_payload
from studio.saves import demo_chapters
from studio.world.models import Save
from studio.universes.demo.loader import DemoDataError

DEMO_SAVE_ID = "drowned-reach-demo"


def load() -> str:
    out = io.StringIO()
    call_command("load_demo", "--no-embed", "--no-knowledge", stdout=out)
    return out.getvalue()


def recorded() -> dict:
    return json.loads(demo_chapters.CHAPTERS_PROVENANCE.read_text(encoding="utf-8"))["chapters"]


def exchanges() -> list[dict]:
    path = demo_chapters.CHAPTERS_DIR / "llm-exchanges.jsonl"
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def test_the_recording_is_in_the_repository_and_says_what_made_it():
    data = recorded()
    assert data["model"] and data["endpoint_kind"] and data["recorded_to"] and data["code_commit"]
    assert data["operation"] == "summarize" and len(data["prompt"]["sha256"]) == 64
    assert len(exchanges()) == data["counts"]["llm_exchanges"] >= data["counts"]["llm_calls"] == len(data["rows"])
    assert all(e["status"] == 200 for e in exchanges())


@pytest.mark.django_db
def test_load_demo_gives_the_48_turn_save_its_chapters_and_summaries(client, staff_user):
    output = load()
    data = recorded()
    save = Save.objects.get(save_id=DEMO_SAVE_ID)
    assert save.current_turn == 48 and "10 chapters and 2 arcs" in output
    rows = list(Chapter.objects.filter(game_save=save).order_by("level", "first_turn"))
    assert [(r.level, r.first_turn, r.last_turn, r.closed_turn, r.close_reason) for r in rows] == [
        (x["level"], x["first_turn"], x["last_turn"], x["closed_turn"], x["close_reason"]) for x in data["rows"]
    ]
    chapters = [r for r in rows if r.level == 0]
    assert len(chapters) == data["counts"]["chapters"] == 10
    # By the save's own rules: scene changes (the state's location) after at least 4 turns, 4 chapters an arc.
    assert {r.close_reason for r in chapters} <= {ChapterCloseReason.SCENE, ChapterCloseReason.LENGTH}
    assert all(b.first_turn == a.last_turn + 1 for a, b in zip(chapters, chapters[1:]))
    assert chapters[0].first_turn == 1 and chapters[-1].last_turn == 47  # turn 48 opens the next chapter
    assert [(r.first_turn, r.last_turn) for r in rows if r.level == 1] == [(1, 19), (20, 38)]
    # Every summary is the model's answer as recorded, none edited.
    answers = {" ".join(str(parse_json_payload(e["content"])["summary"]).split()) for e in exchanges() if e["content"]}
    assert all(r.summary_status == SummaryStatus.DONE and not r.edited for r in rows)
    assert {r.summary for r in rows} <= answers
    # The Console, the Chapters page and the Timeline show them, and say which model wrote the summaries.
    client.force_login(staff_user)
    page = client.get(reverse("saves:chapters", args=[DEMO_SAVE_ID])).content.decode()
    assert all(escape(r.summary) in page for r in rows)
    line = (
        f"The summaries of its 10 chapters and 2 arcs were recorded with {data['model']} on {data['recorded_to'][:10]}."
    )
    assert line in page
    console = client.get(reverse("saves:detail", args=[DEMO_SAVE_ID])).content.decode()
    assert "Chapter 11" in console and "The open chapter runs from turn 48 to turn 48." in console


@pytest.mark.django_db
def test_loading_twice_changes_nothing_and_a_reload_restores_the_recording():
    load()
    save = Save.objects.get(save_id=DEMO_SAVE_ID)
    before = list(Chapter.objects.filter(game_save=save).order_by("pk").values())
    assert "unchanged" in load()
    assert list(Chapter.objects.filter(game_save=save).order_by("pk").values()) == before
    Chapter.objects.filter(game_save=save, level=0, first_turn=1).update(summary="Edited.", edited=True)
    assert "replaced" in load()
    assert Chapter.objects.get(game_save=save, level=0, first_turn=1).summary == before[0]["summary"]


@pytest.mark.django_db
def test_a_broken_file_is_refused_with_nothing_written(tmp_path):
    load()
    save = Save.objects.get(save_id=DEMO_SAVE_ID)
    count = Chapter.objects.filter(game_save=save).count()
    broken = json.loads(demo_chapters.CHAPTERS_FILE.read_text(encoding="utf-8"))
    broken["items"][0]["last_turn"] = 60
    path = tmp_path / "chapters.json"
    path.write_text(json.dumps(broken), encoding="utf-8")
    with pytest.raises(DemoDataError, match="do not lie within"):
        demo_chapters.demo_chapters_load(game_save=save, path=path)
    assert Chapter.objects.filter(game_save=save).count() == count
    assert demo_chapters.demo_chapters_load(game_save=save, path=tmp_path / "none.json").outcome == "missing"

"""Memory inspector pages: facts browser, beliefs with trends, belief page with chart, mental models."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from studio.inspector.charts import evidence_chart
from studio.memory.models import Fact, Job, JobKind, MentalModel, Observation

pytestmark = pytest.mark.django_db


@pytest.fixture
def memory(game_save):
    game_save.memory_mode = "living"
    game_save.current_turn = 60
    game_save.save()
    facts = [
        Fact.objects.create(
            game_save=game_save,
            turn_id=1,
            statement="Kaël docks at Port Vey.",
            fact_type="world",
            entities=["Kaël", "Port Vey"],
        ),
        Fact.objects.create(
            game_save=game_save,
            turn_id=2,
            statement="Mira lends Kaël ten crowns.",
            fact_type="experience",
            entities=["Mira", "Kaël"],
        ),
        Fact.objects.create(
            game_save=game_save,
            turn_id=58,
            statement="Kaël repays Mira.",
            fact_type="experience",
            entities=["KAËL", "Mira"],
        ),
        Fact.objects.create(game_save=game_save, turn_id=61, statement="Beyond the horizon.", entities=["Kaël"]),
    ]
    beliefs = {
        "new": Observation.objects.create(
            game_save=game_save,
            statement="Kaël keeps his word.",
            subject="Kaël",
            sources=[{"fact_id": facts[2].pk, "turn_id": 58}],
            history=[
                {
                    "action": "CREATE",
                    "turn_id": 58,
                    "statement": "Kaël keeps his word.",
                    "subject": "Kaël",
                    "sources_added": [],
                }
            ],
            created_turn_id=58,
            updated_turn_id=58,
        ),
        "stale": Observation.objects.create(
            game_save=game_save,
            statement="Kaël is broke.",
            subject="Kaël",
            sources=[{"fact_id": facts[1].pk, "turn_id": 2}],
            created_turn_id=2,
            updated_turn_id=2,
            stale=True,
        ),
        "mira": Observation.objects.create(
            game_save=game_save,
            statement="Mira trusts Kaël again.",
            subject="Mira",
            sources=[
                {"fact_id": facts[0].pk, "turn_id": 20},
                {"fact_id": facts[1].pk, "turn_id": 50},
                {"fact_id": facts[2].pk, "turn_id": 58},
                {"fact_id": 999999, "turn_id": 59},
            ],
            history=[
                {
                    "action": "CREATE",
                    "turn_id": 20,
                    "statement": "Mira doubts Kaël.",
                    "subject": "Mira",
                    "sources_added": [{"fact_id": 1, "turn_id": 20}],
                },
                {
                    "action": "UPDATE",
                    "turn_id": 58,
                    "statement": "Mira trusts Kaël again.",
                    "subject": "Mira",
                    "sources_added": [{"fact_id": 3, "turn_id": 58}],
                },
            ],
            created_turn_id=20,
            updated_turn_id=58,
        ),
    }
    model = MentalModel.objects.create(
        game_save=game_save,
        subject="Kaël",
        summary="A smuggler who pays his debts.",
        sources=[beliefs["new"].pk, beliefs["stale"].pk],
        stale=True,
    )
    return {"save": game_save, "facts": facts, "beliefs": beliefs, "model": model}


def test_facts_filters_and_links_to_turns(client, playtester, memory):
    game_save = memory["save"]
    client.force_login(playtester)
    url = reverse("memory:facts", args=[game_save.save_id])
    html = client.get(url).content.decode()
    assert "Kaël docks at Port Vey." in html and "Beyond the horizon." not in html  # after the current turn
    assert reverse("saves:turn_detail", args=[game_save.save_id, 2]) in html
    by_entity = client.get(url, {"entity": "kaël"}, HTTP_HX_REQUEST="true").content.decode()
    assert by_entity.lstrip().startswith('<div id="fact-results">') and "<html" not in by_entity
    assert "3 facts" in by_entity  # case-insensitive exact entity match, KAËL included
    assert "Port Vey." in client.get(url, {"entity": "port vey"}).content.decode()
    assert "0 facts" in client.get(url, {"entity": "Kae"}).content.decode()  # exact, not substring
    ranged = client.get(url, {"turn_from": 2, "turn_to": 58, "type": "experience"}).content.decode()
    assert "2 facts" in ranged and "Kaël docks" not in ranged
    searched = client.get(url, {"q": "REPAYS"}).content.decode()
    assert "1 fact " in searched and "Kaël repays Mira." in searched


def test_beliefs_by_subject_with_trends_at_the_current_turn(client, playtester, memory):
    game_save = memory["save"]
    client.force_login(playtester)
    url = reverse("memory:beliefs", args=[game_save.save_id])
    html = client.get(url).content.decode()

    def trend_of(belief):
        row = html[html.index(f'data-belief="{belief.pk}"') :]
        return re.search(r'data-trend="(\w+)"', row).group(1)

    assert trend_of(memory["beliefs"]["new"]) == "new"  # its only source is recent
    assert trend_of(memory["beliefs"]["stale"]) == "stale"  # nothing in the last 15 turns
    assert trend_of(memory["beliefs"]["mira"]) == "strengthening"
    assert 'Kaël</a> <span class="muted">2 · 1 stale' in html
    fragment = client.get(url, {"subject": "mira"}, HTTP_HX_REQUEST="true").content.decode()
    assert fragment.lstrip().startswith('<div id="belief-results">') and "<html" not in fragment
    assert "Mira trusts Kaël again." in fragment and "Kaël is broke." not in fragment


def test_trend_follows_the_save_current_turn(client, playtester, memory):
    game_save = memory["save"]
    game_save.current_turn = 100
    game_save.save()
    client.force_login(playtester)
    html = client.get(reverse("memory:beliefs", args=[game_save.save_id])).content.decode()
    row = html[html.index(f'data-belief="{memory["beliefs"]["new"].pk}"') :]
    assert re.search(r'data-trend="(\w+)"', row).group(1) == "stale"


def test_belief_page_chart_and_history(client, playtester, memory):
    game_save = memory["save"]
    belief = memory["beliefs"]["mira"]
    client.force_login(playtester)
    url = reverse("memory:belief_detail", args=[game_save.save_id, belief.pk])
    html = client.get(url).content.decode()
    assert "<svg" in html and 'class="chart evidence-chart"' in html
    assert re.findall(r'class="bar" data-turn="(\d+)" data-count="(\d+)"', html) == [
        ("20", "1"),
        ("50", "1"),
        ("58", "1"),
        ("59", "1"),
    ]
    assert 'data-action="CREATE" data-turn="20"' in html and 'data-action="UPDATE" data-turn="58"' in html
    assert "Mira doubts Kaël." in html  # the history trail keeps the old statement
    assert "fact 999999 (no longer stored)" in html
    assert 'id="belief-trend">STRENGTHENING' in html
    fragment = client.get(url, HTTP_HX_REQUEST="true").content.decode()
    assert (
        fragment.lstrip().startswith('<section class="card" id="evidence"')
        and "<svg" in fragment
        and "<html" not in fragment
    )


def test_belief_page_escapes_statements_in_the_svg(client, playtester, memory):
    game_save = memory["save"]
    belief = memory["beliefs"]["new"]
    belief.history = [{"action": "CREATE", "turn_id": 58, "statement": "<script>alert(1)</script>", "subject": "Kaël"}]
    belief.save()
    client.force_login(playtester)
    html = client.get(reverse("memory:belief_detail", args=[game_save.save_id, belief.pk])).content.decode()
    assert "<script>alert(1)</script>" not in html and "&lt;script&gt;" in html


def test_belief_of_another_save_is_404(client, playtester, memory, universe):
    from studio.world.models import Save

    other = Save.objects.create(universe=universe, name="other")
    client.force_login(playtester)
    url = reverse("memory:belief_detail", args=[other.save_id, memory["beliefs"]["mira"].pk])
    assert client.get(url).status_code == 404


def test_evidence_chart_bins_a_long_save():
    chart = evidence_chart(source_turns=list(range(1, 1001, 7)), history=[], now_turn=1000)
    assert chart.bin_width > 1 and len(chart.bins) <= 60
    assert sum(n for _, _, n in chart.bins) == len(range(1, 1001, 7))
    assert chart.cumulative[-1] == (1000, len(range(1, 1001, 7)))


def test_evidence_chart_markup_is_unchanged_by_the_template():
    """The chart's SVG, byte for byte as it was when Python strings built it (the fixture was
    written by the string version): bars, windows, ticks, line, markers and escaping."""
    history = [
        {"action": "CREATE", "turn_id": 1, "statement": "Kael <trusts> \"Ilya\" & 'Mara'"},
        {"action": "UPDATE", "turn_id": 9, "statement": "x"},
    ]
    chart = evidence_chart(source_turns=[1, 2, 2, 5, 9], history=history, now_turn=12)
    expected = (Path(__file__).parent / "fixtures" / "evidence_chart.svg").read_text().rstrip("\n")
    assert str(chart.svg) == expected


def test_mental_models_with_sources_and_refresh(client, playtester, memory):
    game_save = memory["save"]
    client.force_login(playtester)
    url = reverse("memory:mental_models", args=[game_save.save_id])
    html = client.get(url).content.decode()
    assert "A smuggler who pays his debts." in html and "Built from 2 beliefs" in html and "Kaël is broke." in html
    assert "Refresh stale models now" in html
    fragment = client.get(url, HTTP_HX_REQUEST="true").content.decode()
    assert fragment.lstrip().startswith('<div id="models">') and "<html" not in fragment
    refresh = reverse("memory:mental_models_refresh", args=[game_save.save_id])
    response = client.post(refresh, {"model_id": memory["model"].pk}, HTTP_HX_REQUEST="true")
    assert response.status_code == 200 and "Refresh queued" in response.content.decode()
    assert Job.objects.filter(game_save=game_save, kind=JobKind.REFRESH_MODELS).count() == 1
    assert client.post(refresh).status_code == 302


def test_refresh_now_flags_a_fresh_model_stale(client, playtester, memory):
    model = memory["model"]
    model.stale = False
    model.save()
    client.force_login(playtester)
    client.post(reverse("memory:mental_models_refresh", args=[memory["save"].save_id]), {"model_id": model.pk})
    model.refresh_from_db()
    assert model.stale


@pytest.mark.parametrize("name", ["memory:facts", "memory:beliefs", "memory:mental_models"])
def test_list_pages_have_constant_query_counts(client, playtester, memory, name):
    game_save = memory["save"]
    client.force_login(playtester)
    url = reverse(name, args=[game_save.save_id])
    client.get(url)
    with CaptureQueriesContext(connection) as few:
        client.get(url)
    for i in range(30):
        f = Fact.objects.create(game_save=game_save, turn_id=5, statement=f"extra {i}", entities=["Kaël"])
        b = Observation.objects.create(
            game_save=game_save,
            statement=f"extra belief {i}",
            subject=f"S{i % 3}",
            sources=[{"fact_id": f.pk, "turn_id": 5}],
        )
        MentalModel.objects.create(game_save=game_save, subject=f"Subject {i}", summary="x", sources=[b.pk])
    with CaptureQueriesContext(connection) as many:
        client.get(url)
    assert len(many) == len(few)

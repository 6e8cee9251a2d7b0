"""Real-browser tests of the playtesting pages: append a turn, rewind with its confirm step,
fork, the search playground with explain and why-not, and a belief page with its chart."""

from __future__ import annotations

import re

import pytest


from studio.memory.models import Fact, Observation
from studio.world.models import Event, Save

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_append_a_turn(logged_in_page, playtester, played):
    page = logged_in_page(playtester)
    page.goto(played.get_absolute_url())
    page.fill("#id_player_input", "I pay Mira back.")
    page.fill("#id_narrative", "Kaël counts twelve silver crowns into Mira's palm.")
    page.click("#append-form button[type=submit]")
    page.wait_for_selector("text=Turn 4 appended")
    assert page.locator("#console-turns li[data-turn='4']").inner_text().count("twelve silver crowns") == 1
    assert page.locator("#save-current-turn").inner_text() == "4"  # the header, updated out of band
    assert page.get_by_role("heading", name="Write turn 5 by hand").is_visible()
    played.refresh_from_db()
    assert played.current_turn == 4
    assert Event.objects.get(game_save=played, turn_id=4).player_input == "I pay Mira back."
    # The embedding job ran at commit: the new turn is searchable.
    page.goto(f"/memory/{played.save_id}/search/?q=twelve+crowns&k=1")
    assert "twelve silver crowns" in page.locator("#results").inner_text()


def test_rewind_with_preview_and_confirm(logged_in_page, playtester, played):
    page = logged_in_page(playtester)
    page.goto(f"/saves/{played.save_id}/rewind/")
    page.fill("#id_turn", "1")
    page.click("#rewind-pick button[type=submit]")
    page.wait_for_selector("#rewind-preview")
    assert page.locator("#rewind-preview td[data-kind='events']").inner_text() == "2"
    played.refresh_from_db()
    assert played.current_turn == 3  # a preview changes nothing
    page.click("#rewind-confirm button[type=submit]")  # the checkbox is required: nothing is sent
    page.wait_for_timeout(300)
    assert page.locator("#rewind-summary").count() == 0
    page.check("#rewind-confirm input[name=confirm]")
    page.click("#rewind-confirm button[type=submit]")
    page.wait_for_selector("#rewind-summary")
    assert "Rewound to turn 1" in page.locator("#rewind-summary").inner_text()
    played.refresh_from_db()
    assert played.current_turn == 1
    assert list(Event.objects.filter(game_save=played).values_list("turn_id", flat=True)) == [1]


def test_fork_from_here(logged_in_page, playtester, played, vector_memory):
    page = logged_in_page(playtester)
    page.goto(f"/saves/{played.save_id}/rewind/?turn=2")
    page.fill("#fork-form input[name=name]", "What if Mira refused")
    page.click("#fork-form button[type=submit]")
    page.wait_for_url(re.compile(r"/saves/(?!%s)[0-9a-f]+/$" % played.save_id))
    fork = Save.objects.get(name="What if Mira refused")
    assert page.url.endswith(fork.get_absolute_url())
    assert "forked from" in page.locator(".save-meta").inner_text()
    assert fork.current_turn == 2 and Event.objects.filter(game_save=fork).count() == 2
    assert sorted({c["turn_id"] for c in vector_memory.get_chunks(fork.save_id)}) == [1, 2]
    played.refresh_from_db()
    assert played.current_turn == 3


def test_playground_with_explain_and_why_not(logged_in_page, playtester, played):
    page = logged_in_page(playtester)
    page.goto(f"/memory/{played.save_id}/search/")
    page.fill("#id_q", "silver crowns")
    page.fill("#id_k", "1")
    page.click("#playground-form button[type=submit]")
    page.wait_for_selector("tr.result")
    row = page.locator("tr.result").first
    assert "Mira lends Kaël ten silver crowns." in row.inner_text()
    assert row.locator("td[data-explain='semantic']").inner_text().startswith("#1")
    assert row.locator("td[data-explain='lexical']").inner_text().startswith("#1")
    assert page.locator("td[data-stage='total']").count() == 1
    assert "q=silver%20crowns" in page.url  # the query is in the address bar (hx-push-url)
    chunk_id = row.get_attribute("data-chunk")
    page.click("text=ranks in every arm")
    page.wait_for_selector(f".why-not-report[data-chunk='{chunk_id}']")
    assert "In the results at rank 1 of 1." in page.locator("#why-not-verdict").inner_text()


def test_belief_page_with_its_chart(logged_in_page, playtester, played):
    played.memory_mode = "living"
    played.current_turn = 30
    played.save()
    facts = [
        Fact.objects.create(game_save=played, turn_id=t, statement=f"Kaël pays at turn {t}.", entities=["Kaël"])
        for t in (5, 20, 28)
    ]
    belief = Observation.objects.create(
        game_save=played,
        statement="Kaël pays his debts.",
        subject="Kaël",
        sources=[{"fact_id": f.pk, "turn_id": f.turn_id} for f in facts],
        history=[
            {"action": "CREATE", "turn_id": 5, "statement": "Kaël might pay.", "subject": "Kaël"},
            {"action": "UPDATE", "turn_id": 28, "statement": "Kaël pays his debts.", "subject": "Kaël"},
        ],
        created_turn_id=5,
        updated_turn_id=28,
    )
    page = logged_in_page(playtester)
    page.goto(f"/memory/{played.save_id}/beliefs/")
    page.click(f"tr[data-belief='{belief.pk}'] a")
    page.wait_for_selector("svg.evidence-chart")
    chart = page.locator("svg.evidence-chart")
    assert chart.is_visible() and chart.bounding_box()["width"] > 200
    bars = chart.locator("rect.bar")
    assert [bars.nth(i).get_attribute("data-turn") for i in range(bars.count())] == ["5", "20", "28"]
    assert chart.locator("g.history-marker").count() == 2
    assert page.locator("#belief-trend").inner_text() in {"STRENGTHENING", "STABLE", "NEW", "WEAKENING", "STALE"}
    assert "Kaël might pay." in page.locator("ol.history").inner_text()


def test_context_viewer_explains_each_item(logged_in_page, playtester, played, vector_memory):
    from studio.memory.models import MentalModel

    played.memory_mode = "living"
    played.save()
    MentalModel.objects.create(game_save=played, subject="Mira", summary="A patient moneylender.")
    Observation.objects.create(
        game_save=played, statement="Mira lent Kaël ten crowns.", subject="Mira", sources=[{"fact_id": 1, "turn_id": 2}]
    )
    vector_memory.sync_lore(
        played.save_id, [{"entry_id": "mira", "title": "Mira", "text": "Mira lends silver crowns at Port Vey."}]
    )
    page = logged_in_page(playtester)
    page.goto(f"/memory/{played.save_id}/context/")
    page.fill("#id_q", "Mira asks about her silver crowns")
    page.fill("#id_budget", "60")
    page.click("#context-form button[type=submit]")
    page.wait_for_selector("#budget-line")
    assert "of 60 tokens used" in page.locator("#budget-line").inner_text()
    models = page.locator("section[data-layer='mental_model'] li")
    assert "A patient moneylender." in models.first.inner_text() and "named in the query" in models.first.inner_text()
    assert page.locator("section[data-layer='narrative'] li").count() >= 1
    assert page.locator("li[data-included='no']").count() >= 1  # the budget cut something, and says so
    # What was cut is folded under one line per layer, after what the narrator reads: open them.
    folds = page.locator("details.context-cut > summary")
    assert folds.count() >= 1 and all(text.endswith("cut: show") for text in folds.all_inner_texts())
    for index in range(folds.count()):
        folds.nth(index).click()
    # Each left-out item says why: over budget, or already in the prompt (the chapter's turns shown in full).
    cut_texts = page.locator("li[data-included='no']").all_inner_texts()
    assert all("cut: " in text for text in cut_texts), cut_texts

"""Real-browser test of "Retry skipped memory jobs" on a save's Jobs page (issue 19 follow-up):
a playtester on a phone recovers the embedding an old rewind skipped; the page fits the phone
and passes axe before and after the htmx swap."""

from __future__ import annotations

import pytest

from studio.memory.models import Job, JobKind, JobStatus
from studio.world.models import Save
from tests.browser.pages import overflow

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

OLD_SKIP = "skipped: timeline rewound (generation 0 -> 1); nothing written"


def test_a_playtester_recovers_the_skipped_memory_jobs(
    phone_page, login, playtester, game_save, vector_memory, axe, settings
):
    settings.AXIOM_JOBS_EAGER = True
    settings.REDIS_URL = ""
    # What the old rewind to 2 left: turn 2's embedding skipped on generation 0, turn 3 dropped.
    Save.objects.filter(pk=game_save.pk).update(current_turn=2, timeline_generation=1)
    common = {
        "game_save": game_save,
        "universe": game_save.universe,
        "kind": JobKind.EMBED_TURN,
        "status": JobStatus.SKIPPED,
        "timeline_generation": 0,
        "progress": OLD_SKIP,
    }
    kept = Job.objects.create(turn_id=2, **common)
    dropped = Job.objects.create(turn_id=3, **common)
    page = phone_page
    login(page, playtester)
    page.goto(f"/memory/{game_save.save_id}/jobs/")
    button = page.get_by_role("button", name="Retry skipped memory jobs")
    assert button.is_visible()
    widths = overflow(page)
    assert widths["scrollWidth"] <= widths["clientWidth"], widths
    assert axe(page) == []
    button.click()
    page.wait_for_selector("text=Recovered 1 skipped memory job; 1 left skipped")
    assert axe(page, "#jobs") == []
    kept.refresh_from_db()
    dropped.refresh_from_db()
    assert (kept.status, kept.timeline_generation) == (JobStatus.DONE, 1)
    assert (dropped.status, dropped.timeline_generation) == (JobStatus.SKIPPED, 0)
    assert [c["turn_id"] for c in vector_memory.get_chunks(game_save.save_id, chunk_type="narrative")] == [2]
    assert page.locator(f"#job-{kept.pk}").get_attribute("data-status") == "done"

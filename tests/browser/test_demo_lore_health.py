"""The demo universe's Lore health page on a phone, with the demo's real data.

The page walk (test_pages.py) checks every page with the small `world` fixture; the demo's
book has longer keys, titles and regex keys, and its replay fills every section, which is
where the page used to scroll sideways (398 px wide at 390 px).
"""

from __future__ import annotations

import io

import pytest
from django.core.management import call_command

from studio.world.models import Universe
from tests.browser.pages import overflow

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_demo_lore_health_fits_a_phone(phone_page, live_server, login, author, screenshot, vector_memory):
    call_command("load_demo", "--no-embed", stdout=io.StringIO())
    universe = Universe.objects.get(slug="the-drowned-reach")
    universe.members.add(author)
    save = universe.saves.order_by("pk").first()
    login(phone_page, author)
    for scope in ("", save.save_id, "all"):
        response = phone_page.goto(f"{live_server.url}/universes/{universe.slug}/lore/health/?save={scope}")
        assert response.status == 200
        phone_page.wait_for_load_state("networkidle")
        assert phone_page.locator("#health-report").count() == 1
        widths = overflow(phone_page)
        if widths["scrollWidth"] > widths["clientWidth"]:
            screenshot(f"demo-lore-health-too-wide-{scope or 'book'}", of=phone_page)
        assert widths["scrollWidth"] <= widths["clientWidth"], (scope, widths)

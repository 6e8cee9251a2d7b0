"""Every studio page on a phone (390x844) and under axe-core, filled with data.

The walk comes from the URL configuration (tests/browser/pages.py), so a new page is checked
the moment it exists. On each page: no sideways scrolling (the document is no wider than the
viewport), "Log out" can be reached, no console error (a CSP violation is one), and axe finds
no serious or critical violation.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.browser.pages import duplicate_ids, overflow, studio_pages

REPORT = Path(__file__).resolve().parents[2] / "test-artifacts" / "phone-and-axe.txt"
SCREENSHOTS = bool(os.environ.get("AXIOM_SCREENSHOTS"))  # a picture of every page, to look at
ONLY = os.environ.get("AXIOM_PAGES", "")  # while working on one page: a part of its URL name
pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_every_studio_page_fits_a_phone_and_passes_axe(phone_page, live_server, login, author, world, axe, screenshot):
    pages = studio_pages(world, author)
    assert len(pages) >= 30, pages
    if ONLY:
        pages = [(name, url) for name, url in pages if ONLY in name]
    login(phone_page, author)
    too_wide, inaccessible, unreachable, checked = [], [], [], []
    for name, url in pages:
        response = phone_page.goto(url)
        assert response.status == 200, f"{name} {url}: {response.status}"
        phone_page.wait_for_load_state("networkidle")
        widths = overflow(phone_page)
        if SCREENSHOTS:
            screenshot(f"phone-{name}", of=phone_page)
        if widths["scrollWidth"] > widths["clientWidth"]:
            too_wide.append(f"{name} {url}: {widths}")
            screenshot(f"too-wide-{name}", of=phone_page)
        logout = phone_page.locator("button", has_text="Log out")
        if name != "login" and not (logout.count() == 1 and _reachable(phone_page, logout)):
            unreachable.append(name)
        inaccessible += [f"{name} {url}: {line}" for line in axe(phone_page)]
        inaccessible += [f"{name} {url}: {line}" for line in duplicate_ids(phone_page)]
        checked.append(name)
    REPORT.parent.mkdir(parents=True, exist_ok=True)
    REPORT.write_text(
        f"{len(checked)} pages checked at 390x844:\n  "
        + "\n  ".join(url for _, url in pages)
        + "\n\ntoo wide:\n  "
        + "\n  ".join(too_wide or ["none"])
        + "\n\nserious/critical axe violations:\n  "
        + "\n  ".join(inaccessible or ["none"])
        + "\n\nmoderate/minor axe findings (not failing):\n  "
        + "\n  ".join(axe.lesser or ["none"])
        + "\n",
        encoding="utf-8",
    )
    assert not too_wide, "pages wider than the phone:\n" + "\n".join(too_wide)
    assert not unreachable, f"'Log out' not reachable on: {unreachable}"
    assert not inaccessible, "axe violations:\n" + "\n".join(inaccessible)
    errors = [e for e in phone_page.console_errors]
    assert not errors, errors


def _reachable(page, locator) -> bool:
    """True when `locator` is visible in the viewport, or becomes so by opening the menu."""
    if locator.is_visible():
        box = locator.bounding_box()
        return box is not None and box["x"] >= 0 and box["x"] + box["width"] <= page.viewport_size["width"]
    toggle = page.locator("button.nav-toggle")
    if toggle.count() and toggle.is_visible():
        toggle.click()
        visible = locator.is_visible()
        toggle.click()
        return visible
    return False

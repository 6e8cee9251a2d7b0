"""The Context viewer lists what was included first and folds what was cut (issue 30): on the
48-turn demo save, what the narrator reads is at the top, the cut turns under one line."""

from __future__ import annotations

import io
import re

import pytest
from django.core.management import call_command
from django.urls import reverse

pytestmark = pytest.mark.django_db


def test_the_demo_saves_context_shows_included_items_first(client, staff_user, vector_memory):
    call_command("load_demo", "--no-embed", "--no-knowledge", stdout=io.StringIO())
    client.force_login(staff_user)
    html = client.get(
        reverse("memory:context", args=["drowned-reach-demo"]), {"q": "Where is the Bellwright's Key?"}
    ).content.decode()
    layers = re.findall(r'<section class="card context-layer" data-layer="(\w+)"[^>]*>(.*?)</section>', html, re.S)
    assert layers
    for layer, body in layers:
        included = [m.start() for m in re.finditer(r'data-included="yes"', body)]
        cut = [m.start() for m in re.finditer(r'data-included="no"', body)]
        if included and cut:
            assert max(included) < min(cut), f"{layer}: a cut item is listed before an included one"
        if cut:  # every cut item is inside the one folded list, under a line that counts them
            fold = re.search(
                r'<details class="context-cut" data-cut="(\d+)">\s*<summary>(\d+) [^<]* cut: show</summary>', body
            )
            assert fold and int(fold.group(1)) == len(cut) == int(fold.group(2)), layer
            assert body.index("<details") < min(cut)
    assert html.count('<details class="context-cut"') >= 2  # the story's superseded summaries, the lore over its share
    chapter = dict(layers).get("chapter", "")
    assert 'data-included="yes"' in chapter  # the recent turns the narrator reads are listed first
    story = dict(layers).get("story", "")
    assert 'data-included="yes"' in story  # the chapters' summaries, now that the demo save has them

"""The chosen alternative of a draft is named by the arrows' count (← 1/2 →), in text and for assistive technology."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from studio.saves.narrator import services
from tests.llm_server import Reply

pytestmark = pytest.mark.django_db
HX = {"HTTP_HX_REQUEST": "true"}


def test_the_chosen_alternative_is_marked(client, playtester, game_save, narrator):
    client.force_login(playtester)
    draft = services.narrator_draft_create(game_save=game_save, player_input="I look around")
    stream = reverse("saves:narrator_stream", args=[game_save.save_id, draft.pk, 1])
    b"".join(client.post(stream).streaming_content)
    narrator.reply = Reply(content="Fog hides the quay.")
    client.post(reverse("saves:narrator_regenerate", args=[game_save.save_id, draft.pk]), **HX)
    html = client.post(
        reverse("saves:narrator_choose", args=[game_save.save_id, draft.pk]), {"number": 1}, **HX
    ).content.decode()
    count = re.search(r'id="draft-swipe-count" aria-live="polite">(\d)/(\d)', html)
    assert count and count.groups() == ("1", "2")
    assert re.search(r'id="draft-previous"[^>]*disabled', html)  # nothing before the first
    assert re.search(r'name="number" value="2">\s*<button type="submit" class="secondary swipe" id="draft-next"', html)

"""A proxy request reads the universe's meta once (issue 33): the lore activation, the guard, the macros,
the chapters and the memory context all read it, seven queries a new message before."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from studio.world.models import UniverseMeta
from tests.llm_server import Reply
from tests.proxy.player import Player

pytestmark = pytest.mark.django_db


def _meta_reads(queries) -> int:
    return sum(1 for q in queries if "universes_universemeta" in q["sql"] and q["sql"].lstrip().startswith("SELECT"))


def test_a_new_message_and_a_swipe_read_the_meta_once(proxy, upstream, play_save):
    UniverseMeta.objects.create(universe=play_save.universe, key="continuity_guard", value="on")
    player = Player(proxy, play_save)
    upstream.reply = Reply(content="Mira closes her ledger.")
    player.say("I walk to the pier.")
    with CaptureQueriesContext(connection) as new_message:
        player.say("I ask Mira about the ledger.")  # accepts the first answer: append, guard, context
    with CaptureQueriesContext(connection) as swipe:
        player.swipe()
    assert _meta_reads(new_message.captured_queries) == 1
    assert _meta_reads(swipe.captured_queries) == 1

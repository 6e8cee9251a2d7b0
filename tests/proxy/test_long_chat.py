"""A 64k-token chat played through the proxy exports and re-imports, and its save file is at
most twice the chat's text: narrator snapshots store each prompt as a delta of the previous
one (`saves/narrator/snapshots.py`), so the file grows with the chat, not with its square, and
each memory context is written against the file's last version of each candidate
(`saves/portable/recorded.py`), so a context full of candidates that only moved costs a few
numbers each.

The turns are embedded as they are played (the jobs run after each commit: a transactional
test), so from the seventh exchange on every context holds about a hundred candidates (the
narrative search asks for as many as the budget could hold), each with its ranks, scores,
reason and cut, as a long chat's contexts do."""

from __future__ import annotations

import json
import time

import pytest

from studio.memory.embeddings.tokens import count_tokens
from studio.saves import portable
from studio.saves.models import NarratorSnapshot
from studio.world.models import Event, MemoryMode
from studio.saves.narrator.snapshots import snapshot_prompts
from studio.saves.services import save_create
from tests.llm_server import Reply
from tests.proxy.player import Player
from tests.proxy.texts import prose

pytestmark = pytest.mark.django_db(transaction=True)

EXCHANGES = 16  # long exchanges: 64k tokens in few requests


def test_a_64k_token_chat_round_trips_in_at_most_twice_its_text(proxy, upstream, universe, settings):
    settings.AXIOM_SAVE_FILE_MAX_BYTES = 64 * 1024 * 1024
    game_save = save_create(universe=universe, name="Long chat", memory_mode=MemoryMode.CLASSIC)
    player = Player(proxy, game_save)
    for n in range(EXCHANGES):
        upstream.reply = Reply(content=prose(1000 + n, 3100))
        player.say(prose(n, 400))
    upstream.reply = Reply(content="The end.")
    player.say("I sleep.")  # the last exchange settles
    chat_text = sum(len(i) + len(a) for i, a in player.settled)
    tokens = sum(count_tokens(i) + count_tokens(a) for i, a in player.settled)
    assert tokens >= 64_000, tokens
    game_save.refresh_from_db()
    assert game_save.current_turn == EXCHANGES
    started = time.perf_counter()
    data = portable.save_export(game_save=game_save).read()
    print(f"\nexport {time.perf_counter() - started:.2f} s")
    sections = {
        name: len(json.dumps(body["items"], ensure_ascii=False)) for name, body in json.loads(data)["sections"].items()
    }
    print(
        f"\nchat {chat_text:,} chars, {tokens:,} tokens; file {len(data):,} bytes ({len(data) / chat_text:.2f}x): {sections}"
    )
    assert len(data) <= 2 * chat_text, sections
    started = time.perf_counter()
    copy = portable.save_import(universe=universe, data=data).game_save
    print(f"import {time.perf_counter() - started:.2f} s")
    assert portable.save_export(game_save=copy).read() == data
    assert list(Event.objects.filter(game_save=copy).values_list("player_input", "narrative")) == player.settled
    # What the narrator saw is intact: each snapshot's whole prompt, as the original's.
    assert snapshot_prompts(game_save=copy) == snapshot_prompts(game_save=game_save)
    last = snapshot_prompts(game_save=copy)[EXCHANGES]
    assert player.settled[-2][1] in last[1] and len(last[1]) > chat_text * 0.9
    assert NarratorSnapshot.objects.filter(game_save=copy).count() == EXCHANGES
    # Full contexts, exactly as recorded: the snapshot page shows every candidate, included or cut, with its reason.
    contexts = list(
        NarratorSnapshot.objects.filter(game_save=game_save).order_by("turn_id").values_list("context", flat=True)
    )
    assert min(len(context["items"]) for context in contexts[6:]) >= 90, [len(c["items"]) for c in contexts]
    assert sum(not item["included"] for item in contexts[-1]["items"]) >= 80
    assert (
        list(NarratorSnapshot.objects.filter(game_save=copy).order_by("turn_id").values_list("context", flat=True))
        == contexts
    )

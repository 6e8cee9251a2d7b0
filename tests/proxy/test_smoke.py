from __future__ import annotations

import json

import pytest

from studio.saves.models import Event, NarratorSnapshot

pytestmark = pytest.mark.django_db


def body(save, messages, **extra):
    return {"model": f"axiom/{save.save_id}/test-model", "messages": messages, **extra}


def test_two_turns(proxy, upstream, play_save):
    sys = {"role": "system", "content": "You are the Narrator. {{axiom_memory}}"}
    r = proxy.post("/v1/chat/completions", body(play_save, [sys, {"role": "user", "content": "I look around."}]))
    assert r.status_code == 200, r.content
    a1 = r.json()["choices"][0]["message"]["content"]
    r = proxy.post("/v1/chat/completions", body(play_save, [
        sys, {"role": "user", "content": "I look around."}, {"role": "assistant", "content": a1},
        {"role": "user", "content": "I walk to the pier."}], stream=True))
    assert r.status_code == 200
    raw = b"".join(r.streaming_content)
    assert b"data: [DONE]" in raw
    play_save.refresh_from_db()
    assert play_save.current_turn == 1
    assert list(Event.objects.filter(game_save=play_save).values_list("player_input", "narrative")) == [("I look around.", a1)]
    assert NarratorSnapshot.objects.filter(game_save=play_save, turn_id=1).exists()

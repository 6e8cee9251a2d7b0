"""Narrator snapshots stored whole every `KEYFRAME_EVERY` turns: a process that has not seen the previous
prompt reads a bounded run of rows, never the save's whole chain of deltas."""

from __future__ import annotations

from studio.saves.models import NarratorSnapshot
from studio.saves.narrator import snapshots
from studio.saves.narrator.snapshots import KEYFRAME_EVERY, snapshot_create, snapshot_prompt, snapshot_prompts


def test_a_cold_read_reads_back_to_the_nearest_whole_snapshot_only(game_save, monkeypatch):
    chat = ""
    expected = {}
    for turn in range(1, 3 * KEYFRAME_EVERY + 6):
        chat += f"[user]\nI look at the harbour, turn {turn}.\n\n[assistant]\nThe tide, turn {turn}.\n\n"
        expected[turn] = ("You narrate Port Vey.", chat)
        snapshot_create(game_save_id=game_save.pk, turn_id=turn, system_prompt=expected[turn][0], user_prompt=chat)
    whole = list(
        NarratorSnapshot.objects.filter(game_save=game_save, prompt_delta__isnull=True)
        .order_by("turn_id")
        .values_list("turn_id", flat=True)
    )
    assert whole == [1, 1 + KEYFRAME_EVERY, 1 + 2 * KEYFRAME_EVERY, 1 + 3 * KEYFRAME_EVERY]
    assert snapshot_prompts(game_save=game_save) == expected  # every prompt rebuilds exactly
    monkeypatch.setattr(snapshots, "_cache", type(snapshots._cache)())  # another process: nothing cached
    last = NarratorSnapshot.objects.get(game_save=game_save, turn_id=3 * KEYFRAME_EVERY + 5)
    read = []
    real = snapshots.prompt_from
    monkeypatch.setattr(
        snapshots, "prompt_from", lambda row, previous, **kw: read.append(row["turn_id"]) or real(row, previous, **kw)
    )
    assert snapshot_prompt(last) == expected[last.turn_id]
    assert read == list(range(1 + 3 * KEYFRAME_EVERY, last.turn_id + 1))

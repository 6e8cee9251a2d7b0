"""The demo's "Who knows what" save as memory tests: each probe of the scenario (written with the truth of who
knows each secret after turn N, bench/data/knowledge/scenario.json) is a `knows` test for turn N exactly, run
on a fork at N (how docs/authoring.md says to judge an earlier turn). Every one passes, and its explain record
gives the reason the knowledge machinery holds."""

from __future__ import annotations

import io
import json

import pytest
from django.core.management import call_command

from studio.saves.checkpoints import CheckpointManager
from studio.saves.demo_knowledge import SCENARIO_FILE
from studio.saves.memory_tests.services import memory_tests_run
from studio.world.models import Save
from studio.universes.memory_tests.services import memory_test_create
from tests.fakes import FakeVectorMemory

pytestmark = pytest.mark.django_db


def test_the_scenarios_probes_pass_as_memory_tests_on_forks_at_their_turns(fake_vectors, no_runner):
    call_command("load_demo", "--no-embed", stdout=io.StringIO())
    save = Save.objects.get(save_id="drowned-reach-knowledge")
    probes = json.loads(SCENARIO_FILE.read_text())["probes"]
    for index, probe in enumerate(probes):
        memory_test_create(
            universe=save.universe,
            data={
                "name": f"probe-{index}",
                "kind": "knows",
                "turn": probe["after_turn"],
                "until": probe["after_turn"],
                "character": probe["character"],
                "entry": probe["secret"],
                "knows": probe["knows"],
            },
        )
    manager = CheckpointManager(vector_memory=FakeVectorMemory())
    judged = {}
    for turn in sorted({p["after_turn"] for p in probes}):
        fork = manager.fork(save, turn)
        run = memory_tests_run(game_save=fork)
        for outcome in run.outcomes:
            if outcome.verdict != "skipped":
                judged[outcome.name] = outcome
    assert len(judged) == len(probes) == 14
    failed = {name: o.summary for name, o in judged.items() if o.verdict != "pass"}
    assert not failed, failed
    assert all(o.explain[0]["record"] == "knowledge" and o.explain[0]["why"] for o in judged.values())

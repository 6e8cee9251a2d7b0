"""The Console's lore line (issue 30): what the Lore Book brought into the last turn, and what
recursion pulled in ("recursion from entry Y"), as the key tester and Lore health say it."""

from __future__ import annotations

import pytest
from django.urls import reverse

from studio.saves.selectors import turn_lore_line
from studio.saves.services import turn_append
from studio.world.models import LoreEntry

pytestmark = pytest.mark.django_db


def test_the_lore_line_names_what_recursion_pulled_in(client, playtester, game_save, eager_jobs, vector_memory):
    universe = game_save.universe
    LoreEntry.objects.filter(universe=universe, entry_id="kael").update(keys=["Kael"], text="Kaël sails from Port Vey.")
    LoreEntry.objects.filter(universe=universe, entry_id="port-vey").update(keys=["Port Vey"], text="A harbour town.")
    turn_append(game_save=game_save, player_input="I look for Kael.", narrative="The quay is empty.")
    line = turn_lore_line(game_save=game_save)
    by_id = {row.entry_id: row for row in line.entries}
    assert line.turn == 4 and {"kael", "port-vey"} <= set(by_id)
    assert by_id["port-vey"].via_entry == "kael" and by_id["port-vey"].via_title == "Kaël" and line.by_recursion == 1
    client.force_login(playtester)
    html = client.get(reverse("saves:detail", args=[game_save.save_id])).content.decode()
    assert "Lore at turn 4: 2 entries, 1 by recursion" in html
    assert 'recursion from entry <a href="/universes/test-world/lore/kael/">Kaël</a>' in html

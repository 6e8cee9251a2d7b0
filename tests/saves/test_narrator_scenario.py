"""The universe's scenario reaches the narrator whole, once, in the instructions (the part that stays put).

SillyTavern writes a card's scenario into its story string ("Scenario: {{scenario}}"); the
studio's opening carries one for every universe (the Metadata page's Opening form). It is not
a `{{meta}}` line (those stop at 300 characters and one line): a long, several-paragraph
scenario is the one an author writes.
"""

from __future__ import annotations

import pytest
from django.urls import reverse

from studio.saves.narrator.prefix import prefix_share
from studio.saves.narrator.prompt import CONFIG, DEFAULT_INSTRUCTIONS, build_narrator_prompt, render_instructions
from studio.world.models import UniverseMeta

pytestmark = pytest.mark.django_db

# Longer than a {{meta}} line may be, in two paragraphs, with a macro.
SCENARIO = (
    "The flood has taken the lower town. {{user}} wakes in the bell tower of Bellspire with the tide "
    "still rising, a stranger's ledger in hand. " * 4
).strip() + "\n\nNobody knows who rang the bell at midnight."
assert len(SCENARIO) > CONFIG.max_meta_value_chars


def _lines_naming_the_scenario(text: str) -> list[str]:
    return [line for line in text.splitlines() if "bell tower" in line or "rang the bell" in line]


def test_the_default_instructions_carry_the_whole_scenario_once_never_as_a_meta_line():
    meta = {"player_character": "Wren", "tone": "grim", "season": "autumn", "scenario": SCENARIO}
    text = render_instructions(DEFAULT_INSTRUCTIONS, meta)
    whole = SCENARIO.replace("{{user}}", "Wren")
    assert f"\nScenario: {whole}\n" in text  # SillyTavern's line, whole, macros filled
    assert text.count("bell tower") == 4 and text.count("rang the bell") == 1  # once
    assert "scenario: " not in text and "season: autumn" in text  # the other short meta still in {{meta}}
    # Where the default instructions place it: after the universe's notes, before the task.
    assert text.index("Tone: grim") < text.index("season: autumn") < text.index("Scenario:") < text.index("Write only")


def test_a_short_scenario_is_its_line_not_a_meta_line_and_no_scenario_no_line():
    text = render_instructions(DEFAULT_INSTRUCTIONS, {"scenario": "A storm night in Port Vey."})
    assert "Scenario: A storm night in Port Vey." in text and text.count("A storm night") == 1
    assert "scenario: A storm" not in text
    assert "Scenario:" not in render_instructions(DEFAULT_INSTRUCTIONS, {"tone": "grim"})  # unset: the line is left out


def test_an_authors_template_places_it_with_its_placeholder_else_gets_it_after_the_instructions():
    meta = {"player_character": "Wren", "scenario": SCENARIO, "weather": "rain"}
    placed = render_instructions(
        "You narrate for {{user}}.\nSituation:\n{{scenario}}\nNotes: {{meta}}\nBe brief.", meta
    )
    assert placed.startswith("You narrate for Wren.\nSituation:\nThe flood")
    assert placed.endswith("Nobody knows who rang the bell at midnight.\nNotes: weather: rain\nBe brief.")
    assert placed.count("rang the bell") == 1
    # A template written before the opening existed (no {{scenario}}): its own part after the instructions, once.
    older = render_instructions("You narrate for {{user}}. {{meta}}", meta)
    assert older.startswith("You narrate for Wren. weather: rain\n\nScenario: The flood has taken the lower town. Wren")
    assert older.count("rang the bell") == 1 and "scenario:" not in older
    # An empty placeholder line goes, as every empty line does.
    assert render_instructions("A\nScenario: {{scenario}}\nB", {}) == "A\nB"


def test_the_scenario_stays_in_the_system_message_the_same_from_turn_to_turn(game_save, meta, vector_memory):
    from studio.universes.services import opening_set

    opening_set(universe=meta, first_message="", alternate_greetings=[], scenario=SCENARIO)
    first = build_narrator_prompt(game_save=game_save, player_input="I climb the bell tower stairs")
    second = build_narrator_prompt(game_save=game_save, player_input="I open the stranger's ledger")
    whole = SCENARIO.replace("{{user}}", "Wren Halloway")
    assert whole in first.system and "bell tower" not in first.user.split("## The player's action")[0]
    assert first.system == second.system  # what stays put: a prefix cache keeps it with the instructions
    share = prefix_share(system=second.system, user=second.user, previous_system=first.system, previous_user=first.user)
    assert share.shared_chars >= len(first.system)


def test_the_opening_form_reaches_the_prompt_preview(client, author, playtester, game_save, meta):
    client.force_login(author)
    response = client.post(
        reverse("universes:opening_save", args=[meta.slug]),
        {"first_message": "", "alternate_greetings": "", "scenario": SCENARIO},
    )
    assert response.status_code == 302
    assert UniverseMeta.objects.get(universe=meta, key="scenario").value == SCENARIO
    client.force_login(playtester)
    page = client.get(
        reverse("saves:narrator_prompt", args=[game_save.save_id]), {"input": "I listen"}
    ).content.decode()
    system = page.split('id="prompt-system">', 1)[1].split("</pre>", 1)[0]
    assert "Scenario: The flood has taken the lower town. Wren Halloway wakes" in system
    assert system.count("rang the bell") == 1

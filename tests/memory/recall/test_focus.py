"""Who the memory context is about: a name resolved to its character once, under its title, with all its memory.

The `reeds` universe (tests/plugins/knowledge.py): Tamsin Reed (alias "Tam") and Jory Reed share
a surname, Mira answers to "the captain". The living memory keyed some of Tamsin's memory
under her alias or her first name, as an extractor does.
"""

from __future__ import annotations

import pytest
from django.urls import reverse

from studio.memory.facts import Fact, insert_facts
from studio.memory.models import MentalModel, Observation
from studio.memory.recall.context import build_memory_context
from studio.world.models import Event, Save

pytestmark = pytest.mark.django_db

RESOLVED = "focus term “Tamsin” → Tamsin Reed (entry tamsin-reed: a part of its title)"


@pytest.fixture
def reed_save(reeds):
    save = Save.objects.create(universe=reeds, name="Run", save_id="reedsfocus", memory_mode="living", current_turn=3)
    for turn in (1, 2, 3):
        Event.objects.create(game_save=save, turn_id=turn, player_input=f"input {turn}", narrative=f"Turn {turn}.")
    MentalModel.objects.create(game_save=save, subject="Tamsin Reed", summary="Keeps the harbour's books.")
    MentalModel.objects.create(game_save=save, subject="Jory Reed", summary="Smuggles salt.")
    Observation.objects.create(
        game_save=save,
        statement="Tamsin Reed owes the guild.",
        subject="Tamsin Reed",
        sources=[{"fact_id": 1, "turn_id": 1}],
    )
    Observation.objects.create(
        game_save=save, statement="Tam fears deep water.", subject="Tam", sources=[{"fact_id": 2, "turn_id": 2}]
    )
    Observation.objects.create(game_save=save, statement="Jory lies easily.", subject="Jory Reed")
    insert_facts(save.save_id, 1, [Fact("Tamsin Reed signs the ledger.", entities=["Tamsin Reed"])])
    insert_facts(
        save.save_id,
        2,
        [
            Fact("Tamsin hides the key.", entities=["Tamsin"]),
            Fact("Tam and Mira share a boat.", entities=["Tam", "Mira"]),
        ],
    )
    insert_facts(
        save.save_id,
        3,
        [Fact("Jory sells salt.", entities=["Jory Reed"]), Fact("Reed was seen at the pier.", entities=["Reed"])],
    )
    return save


def _texts(context, layer):
    return [i.text for i in context.items if i.layer == layer and i.included]


def test_a_first_name_brings_in_the_characters_models_beliefs_and_facts(reed_save):
    context = build_memory_context(
        game_save=reed_save, query_text="What now?", focus_terms=["Tamsin"], token_budget=4000
    )
    assert context.in_focus == ["Tamsin Reed"] and context.subjects == ["tamsin reed"]
    assert _texts(context, "mental_model") == ["Tamsin Reed: Keeps the harbour's books."]
    assert sorted(_texts(context, "belief")) == [
        "Tam fears deep water.",
        "Tamsin Reed owes the guild.",
    ]  # her alias's too
    assert sorted(_texts(context, "fact")) == [
        "(turn 1) Tamsin Reed signs the ledger.",
        "(turn 2) Tam and Mira share a boat.",
        "(turn 2) Tamsin hides the key.",
    ]
    # The explain record: which entry the term resolved to, and how, on every item and for the focus.
    living = [i for i in context.items if i.layer in ("mental_model", "belief", "fact")]
    assert all(RESOLVED in i.reason and i.why["focus"] == RESOLVED for i in living)
    assert context.focus == [
        {
            "name": "Tamsin Reed",
            "key": "tamsin reed",
            "why": RESOLVED,
            "term": "Tamsin",
            "entry_id": "tamsin-reed",
            "by": "a part of its title",
            "keys": ["tamsin reed", "tam", "tamsin"],
        }
    ]
    assert context.as_dict()["focus"] == context.focus and context.as_dict()["subjects"] == ["tamsin reed"]
    assert not any("No character in focus" in note for note in context.notes)


def test_each_character_is_in_focus_once_under_its_title(reed_save):
    context = build_memory_context(
        game_save=reed_save,
        query_text="Tamsin Reed asks the captain about Jory Reed",
        focus_terms=["Tam", "mira"],
        token_budget=4000,
    )
    assert context.in_focus == ["Tamsin Reed", "Mira", "Jory Reed"]  # the alias folded in; no lower-cased key
    assert context.subjects == ["tamsin reed", "mira", "jory reed"]
    assert context.focus[0]["term"] == "Tam" and context.focus[0]["by"] == "one of its keys"
    # Each fact once, under the first subject that names it; each character's mental model once.
    facts = [i.ref["fact_id"] for i in context.items if i.layer == "fact"]
    assert len(facts) == len(set(facts)) == 4
    assert _texts(context, "mental_model") == ["Tamsin Reed: Keeps the harbour's books.", "Jory Reed: Smuggles salt."]
    # The macros read the names in focus: {{char}} is the first character who is not the player, by her title.
    assert context.macros["char"] == "Tamsin Reed"


def test_a_part_two_characters_share_brings_in_neither_and_says_so(reed_save):
    context = build_memory_context(game_save=reed_save, query_text="What now?", focus_terms=["Reed"], token_budget=4000)
    assert context.in_focus == ["Reed"] and context.focus[0]["entry_id"] == ""
    assert any(
        "Focus term “Reed” could be Jory Reed or Tamsin Reed: none of them is brought into focus" in note
        for note in context.notes
    )
    assert _texts(context, "mental_model") == [] and _texts(context, "belief") == []
    assert _texts(context, "fact") == ["(turn 3) Reed was seen at the pier."]  # only what names "Reed" as given


def test_a_focus_term_that_is_part_of_a_title_puts_the_character_on_scene(reed_save):
    from studio.saves.services import turn_append

    turn_append(game_save=reed_save, player_input="I wait", narrative="Mira waits.", state={"present": ["Mira"]})
    context = build_memory_context(game_save=reed_save, query_text="I wait", focus_terms=["Tamsin"], token_budget=4000)
    assert {"name": "Tamsin Reed", "why": "in focus"} in context.pov.characters


def test_the_viewer_shows_each_character_once_under_its_title(client, playtester, reed_save):
    client.force_login(playtester)
    page = client.get(
        reverse("memory:context", args=[reed_save.save_id]),
        {"q": "Tamsin Reed asks the captain", "focus": "Tam, mira", "budget": 4000},
        HTTP_HX_REQUEST="true",
    ).content.decode()
    line = page.split('id="in-focus">', 1)[1].split("</span>\n", 1)[0]
    assert line.startswith("in focus: ")
    assert '>Tamsin Reed</span> <span class="muted">(“Tam”: one of its keys)</span>' in line
    assert ">Mira</span>" in line and line.count("Tamsin Reed</span>") == 1
    assert "tamsin reed" not in line and "mira</span>" not in line
    # The Console's prompt preview says who the narrator's memory is about, the same way.
    preview = client.get(
        reverse("saves:narrator_prompt", args=[reed_save.save_id]), {"input": "I ask Tam about the key"}
    ).content.decode()
    assert 'id="in-focus">in focus: <span class="focus-subject" title="focus term “Ash Vey”">Ash Vey</span>' in preview
    assert '>Tamsin Reed</span> <span class="muted">(“Tam”: one of its keys)</span>' in preview

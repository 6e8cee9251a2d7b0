"""What a character knows (derived from presence, reveals and known_by) and the context by point of view."""

from __future__ import annotations

import pytest

from studio.memory.facts import Fact, insert_facts
from studio.memory.knowledge.derive import KnowledgeView
from studio.memory.knowledge.reveals import reveal_add
from studio.memory.models import Observation
from studio.memory.recall.context import build_memory_context
from studio.saves.services import turn_append

pytestmark = pytest.mark.django_db


def append(save, state, text, facts=()):
    event = turn_append(game_save=save, player_input="go", narrative=text, state=state)
    ids = insert_facts(save.save_id, event.turn_id, [Fact(s, entities=list(e)) for s, e in facts])
    return event.turn_id, ids


@pytest.fixture
def played(living, no_runner, vector_memory):
    t1, (f_debt,) = append(
        living,
        {"present": ["Mira", "Kael", "Ash"], "location": "harbour"},
        "Kael tells Mira about the debt.",
        [("Kael owes Ivo forty crowns.", ["Kael", "Ivo"])],
    )
    t2, (f_map,) = append(
        living,
        {"present": ["Kael", "Ivo"], "location": "chapel"},
        "Ivo shows Kael the map.",
        [("Ivo hid the map behind the altar.", ["Ivo", "map"])],
    )
    t3, _ = append(living, {}, "They whisper.")
    t4, _ = append(living, {"present": ["Mira", "Ash"], "location": "harbour"}, "Mira waits for Ash.")
    vector_memory.embed_chunks(
        living.save_id,
        [
            {"turn_id": 1, "text": "Kael tells Mira about the debt."},
            {"turn_id": 2, "text": "Ivo shows Kael the map behind the altar."},
            {"turn_id": 4, "text": "Mira waits for Ash at the harbour."},
        ],
    )
    vector_memory.sync_lore(
        living.save_id,
        [
            {
                "entry_id": "ledger",
                "title": "The Ledger",
                "text": "The ledger hides the smugglers' debts under the chapel floor.",
            },
            {"entry_id": "tunnel", "title": "The Tunnel", "text": "The Tunnel text."},
        ],
    )
    return {"save": living, "facts": {"debt": f_debt, "map": f_map}, "turns": (t1, t2, t3, t4)}


def test_witnesses_reveals_and_known_by(played):
    save, facts = played["save"], played["facts"]
    view = KnowledgeView(save, horizon=4)
    assert (
        view.fact("Mira", facts["debt"], 1).known
        and view.fact("Mira", facts["debt"], 1).why == "Mira was present at turn 1"
    )
    not_seen = view.fact("Mira", facts["map"], 2)
    assert not not_seen.known and not_seen.why == "Mira was not present at turn 2 and was not told it"
    assert view.fact("Kael", facts["map"], 2).known  # carried into turn 3 too, but witnessed at 2
    assert view.entry("Kael", "ledger").known and not view.entry("Mira", "ledger").known
    assert view.entry("Mira", "tunnel").why == "known_by names The Night Watch (Mira is linked to it)"
    assert not view.entry("Kael", "tunnel").known
    assert view.entry("Ivo", "mira").known  # no known_by: everyone

    reveal_add(game_save=save, turn_id=4, character="the captain", fact_id=facts["map"], told_by="Kay")
    reveal_add(game_save=save, turn_id=4, character="Mira", entry_id="ledger", told_by="Kael")
    view = KnowledgeView(save, horizon=4)
    assert view.fact("Mira", facts["map"], 2).why == "told to Mira by Kael at turn 4"
    assert view.entry("Mira", "ledger").why == "secret; told to Mira by Kael at turn 4"
    assert view.entry("Ivo", "ledger").why == "secret (known by Kael); revealed to Mira at turn 4"
    # Known at 4, not at 3: knowledge is derived from the rows up to the horizon.
    assert not KnowledgeView(save, horizon=3).entry("Mira", "ledger").known


def test_reveal_checks(played):
    save, facts = played["save"], played["facts"]
    with pytest.raises(ValueError, match="later|cannot be told"):
        reveal_add(game_save=save, turn_id=1, character="Mira", fact_id=facts["map"])
    with pytest.raises(ValueError, match="no lore entry"):
        reveal_add(game_save=save, turn_id=2, character="Mira", entry_id="nope")
    with pytest.raises(ValueError, match="does not exist"):
        reveal_add(game_save=save, turn_id=9, character="Mira", entry_id="ledger")


def test_belief_holders(played):
    save, facts = played["save"], played["facts"]
    view = KnowledgeView(save, horizon=4)
    world = [{"fact_id": facts["debt"], "turn_id": 1}, {"fact_id": facts["map"], "turn_id": 2}]
    assert view.belief("Kael", holder="", sources=world).known
    assert view.belief("Mira", holder="", sources=world).why.startswith("source fact from turn 2: Mira was not present")
    assert view.belief("Mira", holder="Mira", sources=[]).known
    assert view.belief("Kael", holder="Mira", sources=[]).why == "held by Mira, not Kael"


def test_pov_sections_hold_only_what_each_character_knows(played):
    save = played["save"]
    Observation.objects.create(
        game_save=save,
        statement="Ivo hid the map.",
        subject="Ivo",
        sources=[{"fact_id": played["facts"]["map"], "turn_id": 2}],
    )
    context = build_memory_context(
        game_save=save, query_text="Mira asks Ivo about the ledger and the map", focus_terms=["Ivo"], token_budget=5000
    )
    pov = context.pov
    assert [c["name"] for c in pov.characters] == ["Mira", "Ash", "Ivo"]
    assert pov.characters[0]["why"] == "present at turn 4"
    view = KnowledgeView(save, horizon=4)
    # Ground truth, written out: who saw which turn (Ash is the player, who acted in every turn: "go");
    # who may know which entry.
    present = {1: {"Mira", "Kael", "Ash"}, 2: {"Kael", "Ivo", "Ash"}, 3: {"Kael", "Ivo", "Ash"}, 4: {"Mira", "Ash"}}
    fact_turn = {played["facts"]["debt"]: 1, played["facts"]["map"]: 2}
    entry_knowers = {"ledger": {"Kael"}, "tunnel": {"Mira"}}
    checked = 0
    for name, items in pov.sections.items():
        for item in items:
            ref = item["ref"]
            if item["layer"] == "fact":
                assert name in present[fact_turn[ref["fact_id"]]]
            elif item["layer"] == "narrative":
                assert name in present[ref["turn_id"]]
            elif item["layer"] == "lore" and ref["entry_id"] in entry_knowers:
                assert name in entry_knowers[ref["entry_id"]]
            elif item["layer"] == "belief":
                assert name in {"Kael", "Ivo", "Ash"}
            checked += 1
    assert checked > 0
    # Ivo (in focus) and Ash (the player, who acted at turn 2) know the map; Mira does not: it is in their
    # sections, not narrator-only.
    assert any("map" in i["text"] for i in pov.sections["Ivo"]) and any("map" in i["text"] for i in pov.sections["Ash"])
    assert not any("map" in i["text"] for i in pov.sections.get("Mira", []))
    assert not any("map" in i["text"] for i in pov.narrator_only)
    text = context.text
    assert "## Point of view" in text and "No character reveals" in text
    ledger = [i for i in context.items if i.ref.get("entry_id") == "ledger" and i.included]
    assert ledger and "[narrator-only] " + ledger[0].text in text  # no on-scene character knows the ledger
    why = {(e["character"], e["ref"].get("entry_id")): e["why"] for e in pov.explain if e["layer"] == "lore"}
    assert why[("Mira", "ledger")] == "secret (known by Kael)"
    assert view.has_data()


def test_pov_can_be_asked_for_or_turned_off(played):
    save = played["save"]
    asked = build_memory_context(game_save=save, query_text="the ledger", pov=["Kay"], token_budget=5000)
    assert [c["name"] for c in asked.pov.characters] == ["Kael"]
    assert any(i["ref"].get("entry_id") == "ledger" for i in asked.pov.sections["Kael"])
    off = build_memory_context(game_save=save, query_text="the ledger", pov=[], token_budget=5000)
    assert off.pov is None and "## Point of view" not in off.text


def test_a_save_without_knowledge_rows_gets_the_context_it_always_had(game_save, vector_memory):
    vector_memory.embed_chunks(game_save.save_id, [{"turn_id": 1, "text": "Kaël docks."}])
    context = build_memory_context(game_save=game_save, query_text="Kaël", token_budget=5000)
    assert context.pov is None and "[narrator-only]" not in context.text


def test_the_narrators_prompt_states_the_rules_at_its_head_and_who_is_on_scene_at_its_end(played):
    from studio.memory.knowledge.pov import POV_RULES
    from studio.saves.narrator.prompt import build_narrator_prompt

    save = played["save"]
    user = build_narrator_prompt(game_save=save, player_input="Kael asks Ivo about the ledger").user
    rules, recent = user.index("## Point of view\n" + POV_RULES), user.index("## Recent turns")
    recalled, scene, action = (
        user.index("## Recalled for this action"),
        user.index("## On scene\nOn scene: "),
        user.index("## The player's action"),
    )
    assert rules < recent < recalled < scene < action  # the rules before the memory they apply to, once
    assert user.count("## Point of view") == 1 and user.count(POV_RULES) == 1
    # The next turn's prompt starts with the same rules: they stay in what a prefix cache reuses.
    append(save, {"present": ["Kael", "Ivo"]}, "Kael turns the ledger's pages.")
    after = build_narrator_prompt(game_save=save, player_input="Ivo answers").user
    assert after[:recent] == user[:recent]

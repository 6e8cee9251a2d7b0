"""The Lore Book in the memory context: activated entries first, the budget rules, macros, the explain."""

from __future__ import annotations


import pytest

from studio.memory.recall.context import build_memory_context
from studio.memory.recall.allocate import assemble
from studio.universes import services
from studio.world.models import LoreEntry
from tests.memory.recall.budget_items import budget_item
from tests.plugins.demo import QUESTION

pytestmark = pytest.mark.django_db


def included_entries(context):
    return [i.ref["entry_id"] for i in context.included if i.layer == "lore"]


def test_demo_question_brings_both_entries(demo):
    context = build_memory_context(game_save=demo, query_text=QUESTION)
    assert {"hesper-vale", "copper-hood"} <= set(included_entries(context))
    hesper = next(i for i in context.items if i.ref.get("entry_id") == "hesper-vale")
    assert hesper.policy.protected and "matched key “Hesper” in the pending input" in hesper.reason
    explain = {r["entry_id"]: r for r in context.lore_explain}
    assert len(explain) == demo.universe.lore_entries.count()
    assert explain["hesper-vale"]["included"] and explain["hesper-vale"]["code"] == "key"
    assert explain["copper-hood"]["included"] and explain["copper-hood"]["semantic_rank"] is not None


def test_a_named_entry_beats_narrative_chunks(demo):
    # A budget the narrative chunks alone would fill: the entry the input names still goes in whole.
    context = build_memory_context(game_save=demo, query_text=QUESTION, token_budget=250, k_narrative=6)
    hesper = next(i for i in context.items if i.ref.get("entry_id") == "hesper-vale")
    assert hesper.included and hesper.text.endswith("fate of the Reach.")
    narrative = [i for i in context.items if i.layer == "narrative"]
    assert any(not i.included for i in narrative)
    assert all(i.cut.startswith("over budget: needs") and "left out whole" in i.cut for i in context.cut)
    assert context.used_tokens <= 250


def test_budget_passes_ignore_budget_protected_then_shares():
    item = budget_item
    items = [
        item("narrative", 50),
        item("narrative", 50),
        item("lore", 30, protected=True, activation="key"),
        item("lore", 500, ignore_budget=True, activation="constant"),
        item("lore", 40),
    ]
    assemble(items, token_budget=130, shares={"narrative": 50, "lore": 100})
    assert [i.included for i in items] == [True, False, True, True, True]
    assert "narrative share (50% = 65 tokens)" in items[1].cut and items[1].cut.startswith("over budget: needs 50")
    # Without the share cap the second chunk fits again: pass 4 gives it what was left.
    items = [item("narrative", 50), item("narrative", 20), item("lore", 30, protected=True)]
    assemble(items, token_budget=100, shares={"narrative": 50})
    assert [i.included for i in items] == [True, True, True] and "other layers left" in items[1].why["budget"]


_item = budget_item


def test_the_budget_kept_for_recall_holds_off_the_story_and_activated_lore():
    # Offered first, recent turns and activated lore may not spend the 40% kept for what the action recalls.
    turns = [_item("chapter", 30) for _ in range(3)]
    activated = [_item("lore", 20, activation="recursion") for _ in range(2)]
    recalled = [_item("lore", 45, final_rank=1), _item("narrative", 35, final_rank=1)]
    items = turns + activated + recalled
    assemble(items, token_budget=200, shares={"chapter": 100, "lore_activated": 100}, reserve=40)
    assert [i.included for i in turns] == [True, True, True]  # 90 of the 120 the others may use
    assert [i.included for i in activated] == [True, False]
    assert "kept for what the action recalls (40% of the budget" in activated[1].cut
    assert all(i.included for i in recalled)  # the 80 kept: the top lore hit is in; 10 left, too few to refill
    # What recall did not need goes back: with a smaller recall, the held-back entry is taken in pass 4.
    items = [_item("lore", 20, activation="recursion") for _ in range(5)] + [_item("narrative", 10)]
    assemble(items, token_budget=100, shares={"lore_activated": 100}, reserve=40)
    assert [i.included for i in items] == [True, True, True, True, False, True]
    items = [_item("lore", 20, activation="recursion") for _ in range(4)] + [_item("narrative", 10)]
    assemble(items, token_budget=90, shares={"lore_activated": 100}, reserve=40)
    assert all(i.included for i in items[:4]) and items[4].included
    assert (
        items[3].why["budget"] == "held back by the budget kept for recall, taken from the budget the other layers left"
    )
    # A story-so-far item is never refilled (its window is planned): held back, it stays out.
    items = [_item("chapter", 80), _item("narrative", 5)]
    assemble(items, token_budget=100, shares={}, reserve=40)
    assert [i.included for i in items] == [False, True]


def test_a_dated_groups_heading_is_paid_once():
    items = [
        _item("narrative", 10, group="8 May", group_tokens=4),
        _item("narrative", 10, group="8 May", group_tokens=4),
        _item("narrative", 10, group="9 May", group_tokens=4),
    ]
    assemble(items, token_budget=38, shares={})
    assert [i.included for i in items] == [True, True, True]  # 14 + 10 + 14
    items = [
        _item("narrative", 10, group="8 May", group_tokens=4),
        _item("narrative", 10, group="9 May", group_tokens=4),
    ]
    assemble(items, token_budget=27, shares={})
    assert [i.included for i in items] == [True, False] and items[1].cut.startswith(
        "over budget: needs 14 tokens, 13 left"
    )


def test_recall_is_offered_in_rounds_so_the_top_lore_hit_is_not_behind_the_chunks(demo):
    # A budget where, after the protected entry, the lore the chat activates and the best chunk,
    # the second chunk (~170 tokens) would leave too little for the top lore hit (~90) if lore
    # found by meaning were offered after every chunk (as before: checked by that sabotage).
    demo.universe.meta.update_or_create(key="context_share_narrative", defaults={"value": "100"})
    # No point of view (the demo's turns record who is present): the arithmetic is the lore's and the chunks'.
    context = build_memory_context(game_save=demo, query_text=QUESTION, token_budget=640, k_narrative=12, pov=())
    narrative = [i for i in context.items if i.layer == "narrative"]
    hood = next(i for i in context.items if i.ref.get("entry_id") == "copper-hood")
    assert hood.included and hood.why.get("final_rank") is not None
    assert any(not i.included for i in narrative) and context.used_tokens <= 640


def test_macros_are_filled_in_what_the_narrator_receives_only(demo, author):
    universe = demo.universe
    services.lore_entry_create(
        universe=universe,
        user=author,
        title="Greeting",
        keys=["lantern"],
        text="{{char}} lifts a lantern for {{user}}.",
    )
    context = build_memory_context(game_save=demo, query_text="light the lantern", focus_terms=["Hesper Vale"])
    greeting = next(i for i in context.items if i.ref.get("entry_id") == "greeting")
    assert greeting.included and "Hesper Vale lifts a lantern for Wren Halloway." in greeting.text
    assert LoreEntry.objects.get(universe=universe, entry_id="greeting").text.startswith("{{char}}")


def test_rules_refuse_semantic_lore_too(demo, author):
    universe = demo.universe
    entry = universe.lore_entries.get(entry_id="copper-hood")
    services.lore_entry_update(entry=entry, user=author, activation={"enabled": False})
    context = build_memory_context(game_save=demo, query_text=QUESTION)
    assert "copper-hood" not in included_entries(context)
    explain = {r["entry_id"]: r for r in context.lore_explain}["copper-hood"]
    assert not explain["included"] and explain["code"] == "disabled"


def test_share_meta_keys_are_validated_and_used(demo):
    from django.core.exceptions import ValidationError

    from studio.memory.recall.policy import SHARE_CLASSES, share_meta_key
    from studio.universes.services import meta_validate

    for share_class in SHARE_CLASSES:
        assert meta_validate(key=share_meta_key(share_class), value=" 30 ") == "30"
    with pytest.raises(ValidationError, match="between 0 and 100"):
        meta_validate(key="context_share_narrative", value="150")
    with pytest.raises(ValidationError, match="whole number"):
        meta_validate(key="context_share_narrative", value="half")
    demo.universe.meta.update_or_create(key="context_share_narrative", defaults={"value": "0"})
    context = build_memory_context(game_save=demo, query_text=QUESTION, token_budget=5000)
    assert context.shares["narrative"] == 0
    narrative = [i for i in context.items if i.layer == "narrative"]
    # A zero share: narrative only gets what every other layer left over.
    assert narrative and all(
        i.why.get("budget") == "over its share, taken from the budget the other layers left"
        for i in narrative
        if i.included
    )


def test_context_viewer_shows_the_explain_panel_full_page_and_fragment(demo, client, playtester):
    demo.universe.members.add(playtester)
    client.force_login(playtester)
    url = f"/memory/{demo.save_id}/context/"
    for headers in ({}, {"HTTP_HX_REQUEST": "true"}):
        response = client.get(url, {"q": QUESTION}, **headers)
        body = response.content.decode()
        assert response.status_code == 200
        assert 'id="lore-explain"' in body and ("<html" in body) == (not headers)
        assert 'data-entry-id="hesper-vale" data-included="yes" data-code="key"' in body
        assert "matched key “Hesper” in the pending input" in body
        assert body.count('<tr data-entry-id="') == demo.universe.lore_entries.count()


def test_an_entry_naming_a_character_in_focus_is_protected(demo):
    # Corvin Tull is activated by the last narration, not by the input; in focus, he is kept.
    # No point of view (the demo's turns record who is present): the budget is the lore's.
    plain = build_memory_context(game_save=demo, query_text="I wait by the door", token_budget=200, pov=())
    focused = build_memory_context(
        game_save=demo, query_text="I wait by the door", token_budget=200, focus_terms=["Corvin Tull"], pov=()
    )
    corvin = next(i for i in focused.items if i.ref.get("entry_id") == "corvin-tull")
    assert corvin.included and corvin.policy.protected and corvin.why["in_focus"] == ["Corvin Tull"]
    assert "in focus" in corvin.reason
    before = next((i for i in plain.items if i.ref.get("entry_id") == "corvin-tull"), None)
    assert before is None or not before.policy.protected

"""The Lore Book in the memory context: activated entries first, the budget rules, macros, the explain."""
from __future__ import annotations


import pytest

from studio.memory.recall.context import build_memory_context
from studio.memory.recall.context_lore import assemble, whole_sentences
from studio.universes import services
from studio.universes.models import LoreEntry
from tests.plugins.demo import QUESTION

pytestmark = pytest.mark.django_db


def included_entries(context):
    return [i.ref["entry_id"] for i in context.included if i.layer == "lore"]


def test_demo_question_brings_both_entries(demo):
    context = build_memory_context(game_save=demo, query_text=QUESTION)
    assert {"hesper-vale", "copper-hood"} <= set(included_entries(context))
    hesper = next(i for i in context.items if i.ref.get("entry_id") == "hesper-vale")
    assert hesper.why["protected"] and "matched key “Hesper” in the pending input" in hesper.reason
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
    from studio.memory.recall.context import ContextItem

    def item(layer, tokens, **why):
        return ContextItem(layer=layer, text="x", tokens=tokens, reason="", why=why)

    items = [item("narrative", 50), item("narrative", 50), item("lore", 30, protected=True, activation="key"),
             item("lore", 500, ignore_budget=True, activation="constant"), item("lore", 40)]
    assemble(items, token_budget=130, shares={"narrative": 50, "lore": 100})
    assert [i.included for i in items] == [True, False, True, True, True]
    assert "narrative share (50% = 65 tokens)" in items[1].cut and items[1].cut.startswith("over budget: needs 50")
    # Without the share cap the second chunk fits again: pass 4 gives it what was left.
    items = [item("narrative", 50), item("narrative", 20), item("lore", 30, protected=True)]
    assemble(items, token_budget=100, shares={"narrative": 50})
    assert [i.included for i in items] == [True, True, True] and "other layers left" in items[1].why["budget"]


def test_whole_sentences_drop_an_unfinished_tail():
    assert whole_sentences("The tide turns. Wren runs to the") == "The tide turns."
    assert whole_sentences("No sentence end at all") == "No sentence end at all"
    assert whole_sentences("“Go,” she says. Done!") == "“Go,” she says. Done!"


def test_macros_are_filled_in_what_the_narrator_receives_only(demo, author):
    universe = demo.universe
    services.lore_entry_create(universe=universe, user=author, title="Greeting", keys=["lantern"],
                               text="{{char}} lifts a lantern for {{user}}.")
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

    from studio.memory.recall.context_lore import SHARE_CLASSES, share_meta_key
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
    assert narrative and all(i.why.get("budget") == "over its share, taken from the budget the other layers left"
                             for i in narrative if i.included)



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
    plain = build_memory_context(game_save=demo, query_text="I wait by the door", token_budget=200)
    focused = build_memory_context(game_save=demo, query_text="I wait by the door", token_budget=200,
                                   focus_terms=["Corvin Tull"])
    corvin = next(i for i in focused.items if i.ref.get("entry_id") == "corvin-tull")
    assert corvin.included and corvin.why["protected"] and corvin.why["in_focus"] == ["corvin tull"]
    assert "in focus" in corvin.reason
    before = next((i for i in plain.items if i.ref.get("entry_id") == "corvin-tull"), None)
    assert before is None or not before.why["protected"]

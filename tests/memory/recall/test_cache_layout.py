"""The layout for prefix caches: a cap on what changes with each action, a window that reaches back.

`context_cap_recall` (Universe_Meta) holds what the prompt lays out after the recent turns (what
the action recalled, lore its turn activated) to a share of the budget even when budget is
left; the recent turns' window then reaches back past the open chapter, and the summaries tell
only what it does not show. Chapter marks stay on every chapter start inside the window.
"""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError

from studio.memory.chapters.models import Chapter
from studio.memory.chapters.services import chapter_summary_edit
from studio.memory.chapters.story import story_items
from studio.memory.recall.allocate import assemble
from studio.memory.recall.context import build_memory_context
from studio.memory.recall.context_items import ContextItem
from studio.memory.recall.policy import context_policy, window_plan
from studio.world.models import Save, UniverseMeta
from studio.saves.narrator.prompt import build_narrator_prompt, render_instructions
from studio.saves.services import turn_append
from tests.memory.recall.budget_items import budget_item
from tests.plugins.demo import QUESTION

pytestmark = pytest.mark.django_db


_item = budget_item


def test_the_cap_holds_what_changes_with_each_action_even_when_budget_is_left():
    constant = _item("lore", 30, activation="constant")
    turns = [_item("chapter", 20) for _ in range(2)]
    named = _item("lore", 15, protected=True, activation="key")  # the player named it: in, and it counts
    recalled = [_item("narrative", 10) for _ in range(4)] + [_item("lore", 10, final_rank=1)]
    items = [constant, *turns, named, *recalled]
    assemble(items, token_budget=200, shares={}, reserve=20, cap=20)  # 40 tokens for what changes each action
    assert constant.included and all(t.included for t in turns) and named.included
    assert [i.included for i in recalled] == [True, True, False, False, False]  # 15 + 10 + 10 = 35; 45 > 40
    assert "capped at 20% of the budget = 40 tokens (context_cap_recall), 5 left" in recalled[2].cut
    assert sum(i.tokens for i in items if i.included) < 200  # budget left unused on purpose
    assert sum(i.tokens for i in items if i.included and i.policy.per_action) <= 40
    # Without a cap the same candidates fill the budget (today's default).
    for item in items:
        item.included, item.cut = False, ""
    assemble(items, token_budget=200, shares={}, reserve=20)
    assert all(i.included for i in items)


def test_lore_the_turn_activated_does_not_spend_the_part_of_the_cap_kept_for_recall():
    # Activated by the recent turns' text and offered before recall, it waits: the 20 kept for recall come first.
    activated = [_item("lore", 20, activation="recursion") for _ in range(2)]
    hit = _item("lore", 20, final_rank=1)  # the entry found by meaning for the action
    items = [*activated, hit]
    assemble(items, token_budget=200, shares={}, reserve=10, cap=20)  # cap 40, of which 20 kept for recall
    assert hit.included and [i.included for i in activated] == [True, False]
    assert "capped at 20% of the budget = 40 tokens (context_cap_recall), 0 left" in activated[1].cut
    # What recall leaves of the cap goes back to activated lore afterwards.
    items = [*[_item("lore", 10, activation="recursion") for _ in range(3)], _item("lore", 5, final_rank=1)]
    assemble(items, token_budget=200, shares={}, reserve=10, cap=20)
    assert all(i.included for i in items)  # 10 + (held, then refilled) 10 + 10 + 5 = 35 <= 40


def test_the_cap_is_read_from_meta_and_the_reserve_never_exceeds_it():
    # Cache-first by default (docs/benchmarks.md, "One context, one prompt"): a 12% cap, 10% kept for recall.
    assert context_policy({}).cap_recall == 12 and context_policy({}).reserve_recall == 10
    assert context_policy({"context_cap_recall": " 15 "}).cap_recall == 15
    assert context_policy({"context_cap_recall": "5"}).reserve_recall == 5  # a floor above the cap could not be kept
    assert context_policy({"context_cap_recall": "50", "context_reserve_recall": "30"}).reserve_recall == 30
    assert (
        context_policy({"context_cap_recall": "150"}).cap_recall == 12
    )  # out of range: the default, as an invalid share
    assert window_plan({})["reach_back"] is True and window_plan({})["max_turns"] == 10
    assert window_plan({})["shares"]["chapter"] == 80  # min(85, 100 - 10 - 10)
    assert window_plan({"context_cap_recall": "50", "context_reserve_recall": "30"})["shares"]["chapter"] == 60

    from studio.universes.services import meta_validate

    assert meta_validate(key="context_cap_recall", value=" 10 ") == "10"
    with pytest.raises(ValidationError, match="between 0 and 100"):
        meta_validate(key="context_cap_recall", value="101")


@pytest.fixture
def chaptered(universe, fake_vectors):
    """Ten turns, a new place every third turn from turn 4: chapters 1-3, 4-6, 7-9 closed, 10 open; summaries set."""
    for key, value in {"chapter_turns": "0", "chapter_min_turns": "3", "chapters_per_arc": "0"}.items():
        UniverseMeta.objects.create(universe=universe, key=key, value=value)
    game_save = Save.objects.create(universe=universe, name="Chapters")
    places = ["harbour"] * 3 + ["market"] * 3 + ["bell"] * 3 + ["mole"]
    for turn, place in enumerate(places, start=1):
        turn_append(
            game_save=game_save,
            player_input=f"act {turn}",
            narrative=f"Turn {turn} happens in the {place}.",
            state={"location": place},
        )
    for chapter in Chapter.objects.filter(game_save=game_save):
        chapter_summary_edit(chapter=chapter, text=f"Summary of turns {chapter.first_turn}-{chapter.last_turn}.")
    return game_save


def _story(game_save, *, budget, reach_back):
    return story_items(
        game_save,
        horizon=10,
        token_budget=budget,
        shares={"chapter": 100, "summary": 100},
        make_item=ContextItem.of,
        fill=lambda text: text,
        reach_back=reach_back,
    )


def test_with_reach_back_the_window_shows_earlier_chapters_and_the_summaries_tell_only_the_rest(chaptered):
    assert [(c.first_turn, c.last_turn) for c in Chapter.objects.filter(game_save=chaptered, level=0)] == [
        (1, 3),
        (4, 6),
        (7, 9),
    ]
    # Held to the open chapter (and its last four turns, from an anchored start): turns 5-10 and every summary before 10.
    held = _story(chaptered, budget=10_000, reach_back=False)
    assert held.shown_turns == [5, 6, 7, 8, 9, 10]
    assert [i.ref["first_turn"] for i in held.summaries] == [1, 4, 7]
    # Reaching back, a roomy share shows every turn, and no summary repeats them.
    roomy = _story(chaptered, budget=10_000, reach_back=True)
    assert roomy.shown_turns == list(range(1, 11)) and roomy.summaries == []
    # A share that holds turns 5-10: the chapter holding turn 4 (partly out of sight) is told whole, and the one before.
    size = sum(i.tokens for i in roomy.turns if i.ref["turn_id"] >= 5) + 6  # turn 5 opens the window dated/longer
    tight = _story(chaptered, budget=size, reach_back=True)
    assert tight.shown_turns[0] == 5 and tight.shown_turns[-1] == 10
    assert [(i.ref["first_turn"], i.ref["last_turn"]) for i in tight.summaries] == [(1, 3), (4, 6)]


def test_every_chapter_start_inside_the_window_keeps_its_mark(chaptered):
    story = _story(chaptered, budget=10_000, reach_back=True)
    assert [i.ref["turn_id"] for i in story.turns if i.why["begins_chapter"]] == [4, 7, 10]


def test_with_a_cap_consecutive_prompts_share_everything_up_to_what_the_action_recalled(chaptered, vector_memory):
    UniverseMeta.objects.create(universe=chaptered.universe, key="context_cap_recall", value="10")
    # The window's turn bound (context_recent_turns, 10) would move it at turn 11: this test is about the share.
    UniverseMeta.objects.create(universe=chaptered.universe, key="context_recent_turns", value="60")
    before = build_narrator_prompt(
        game_save=chaptered, player_input="look at the mole", vector_memory=vector_memory
    ).user
    turn_append(
        game_save=chaptered,
        player_input="look at the mole",
        narrative="Turn 11: the mole is quiet.",
        state={"location": "mole"},
    )
    after = build_narrator_prompt(game_save=chaptered, player_input="walk on", vector_memory=vector_memory).user
    # The recent turns of the first prompt are a prefix of the second's, which appends turn 11 to them.
    head = before.split("## Recalled for this action")[0].rstrip()
    assert after.startswith(head) and "(A new chapter begins.)\nTurn 7" in head
    assert after[len(head) :].lstrip().startswith("Turn 11")


def test_the_demo_context_with_a_cap_keeps_what_changes_each_action_under_it(demo):
    UniverseMeta.objects.update_or_create(universe=demo.universe, key="context_cap_recall", defaults={"value": "15"})
    # With the story so far (what stays put before what changes); without it there is nothing for a cap to keep.
    context = build_memory_context(game_save=demo, query_text=QUESTION, token_budget=2000, story=True)
    assert context.cap_recall == 15 and context.as_dict()["cap_recall"] == 15
    plain = build_memory_context(game_save=demo, query_text=QUESTION, token_budget=2000)
    assert not any("context_cap_recall" in i.cut for i in plain.cut)
    changing = [i for i in context.included if i.policy.per_action and not i.policy.outside_budget]
    assert changing and sum(i.tokens + i.why.get("group_tokens", 0) for i in changing) <= 300 + 50  # headings paid once
    assert any("context_cap_recall" in i.cut for i in context.cut)


def test_the_narrators_meta_lists_prose_never_settings():
    meta = {
        "weather": "rain",
        "context_cap_recall": "10",
        "context_share_chapter": "85",
        "chapter_turns": "12",
        "chapter_on_scene_change": "false",
        "sampler_repetition_penalty": "1.1",
        "lore_scan_depth": "3",
        "belief_mission": "Remember debts.",
    }
    text = render_instructions("Notes:\n{{meta}}", meta)
    assert text == "Notes:\nweather: rain"


def test_every_knob_an_author_sets_is_explained_and_checked_by_its_one_declaration():
    from studio.universes.services import meta_validate
    from studio.memory.recall.policy import META_KNOBS, context_policy
    from studio.universes.meta_keys import KNOWN_BY_KEY, SETTINGS_GROUPS

    for key, knob in META_KNOBS.items():
        row = KNOWN_BY_KEY[key]  # the Metadata page's row: the knob's own help, group and default
        assert (row.help, row.group, row.default) == (knob.help, knob.group, knob.default_text()), key
        assert row.group in SETTINGS_GROUPS  # a setting, never prose for the narrator's {{meta}}
        bad = {"bool": "maybe", "choice": "nowhere"}.get(knob.kind, str((knob.high or 0) + 1))
        with pytest.raises(ValidationError, match=key):
            meta_validate(key=key, value=bad)
        good = "false" if knob.kind == "bool" else knob.choices[-1] if knob.kind == "choice" else str(knob.low)
        assert meta_validate(key=key, value=f" {good} ") == good
        field = knob.field.split(".")
        value = context_policy({key: good})
        value = value.shares[field[1]] if field[0] == "shares" else getattr(value, knob.field)
        assert str(value).lower() == good, key  # the policy reads what the page stored

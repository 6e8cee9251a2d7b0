"""Focus excerpts: lower-ranked narrative chunks represented by the sentences the action asks about."""

from __future__ import annotations

import pytest

from studio.memory.embeddings.tokens import count_tokens
from studio.memory.recall.context import build_memory_context
from studio.memory.recall.context_items import ContextItem
from studio.memory.recall.excerpt import excerpt_items, focus_excerpt, segments_of, term_weights
from studio.memory.recall.policy import DEFAULT_POLICY
from studio.world.models import Event

MAX_KEPT_FRACTION = DEFAULT_POLICY.excerpt_max_kept_fraction

LONG = (
    "(turn 7) Mira: The rain kept falling on the harbour all night long. "
    "I counted the crates of salt in the cellar twice before dawn. "
    "The dogs barked somewhere far off and nobody came to see why. "
    "By morning the tide had turned and the gulls were back on the roofs."
)


def weights_for(query: str, *texts: str) -> dict[str, float]:
    return term_weights(query, list(texts) or [LONG])


def test_segments_end_at_sentence_ends_never_inside_brackets():
    text = "She waves. [shares a photo: a sign. It reads hello] Look at it! And a trailing clause"
    assert segments_of(text) == [
        "She waves.",
        "[shares a photo: a sign. It reads hello] Look at it!",
        "And a trailing clause",
    ]


def test_excerpt_keeps_the_best_sentence_and_the_next_the_speaker_and_marks_both_cuts():
    excerpt = focus_excerpt(LONG, weights_for("How many crates did Mira count in the cellar?"))
    assert excerpt.text == (
        "(turn 7) Mira: […] I counted the crates of salt in the cellar twice before dawn. "
        "The dogs barked somewhere far off and nobody came to see why. […]"
    )
    assert excerpt.kept == (2, 3) and excerpt.segments == 4
    assert excerpt.terms == (
        "cellar",
        "count",
        "crat",
    )  # the action's BM25 terms (inflections folded); "Mira" is the speaker


def test_excerpt_marks_only_the_side_that_is_cut():
    first = focus_excerpt(LONG, weights_for("rain on the harbour"))
    assert first.text == (
        "(turn 7) Mira: The rain kept falling on the harbour all night long. "
        "I counted the crates of salt in the cellar twice before dawn. […]"
    )
    last = focus_excerpt(LONG, weights_for("gulls on the roofs"))
    assert last.text == "(turn 7) Mira: […] By morning the tide had turned and the gulls were back on the roofs."


def test_without_a_saving_the_window_gives_way_to_the_best_sentences_alone_joined_by_a_mark():
    text = "One crate. Two dogs. Three crates. Four gulls. Five gulls. Six gulls."
    excerpt = focus_excerpt(text, weights_for("crates", text))  # with the next ones: 4 of 6 sentences, too little saved
    assert excerpt is not None and excerpt.text == "One crate. […] Three crates. […]"
    assert excerpt.kept == (1, 3)


def test_a_window_of_a_longer_turn_keeps_its_marks_and_has_no_speaker():
    window = "[…] as follows: the rain fell. Mira counted the crates. The dogs barked. The gulls cried. […]"
    excerpt = focus_excerpt(window, weights_for("crates", window))
    assert excerpt.text == "[…] Mira counted the crates. The dogs barked. […]"


def test_the_chunk_stays_whole_without_a_signal_or_a_saving():
    assert focus_excerpt(LONG, weights_for("lanterns and ghosts")) is None  # no word of the action in it
    assert focus_excerpt("(turn 2) Mira: I counted the crates.", weights_for("crates", "I counted the crates.")) is None
    two = "Mira counted the crates of salt in the cellar twice before dawn. Yes."
    assert focus_excerpt(two, weights_for("crates", two)) is None  # keeps more than MAX_KEPT_FRACTION
    assert count_tokens(
        "Mira counted the crates of salt in the cellar twice before dawn."
    ) > MAX_KEPT_FRACTION * count_tokens(two)


def test_a_rare_term_outweighs_one_every_chunk_holds():
    others = [f"Mira walks to the market {n}." for n in range(5)]
    text = (
        "Mira sighed at the market, where the stalls were closing for the night. "
        "The lighthouse keeper waved from the rocks. Then it rained on the whole town until dawn."
    )
    weights = term_weights("Mira and the lighthouse keeper", [text, *others])
    assert weights["mira"] < weights["lighthous"] == weights["keeper"]
    excerpt = focus_excerpt(text, weights)
    assert (
        excerpt.text == "[…] The lighthouse keeper waved from the rocks. Then it rained on the whole town until dawn."
    )


def item(text: str, rank: int) -> ContextItem:
    return ContextItem.of(
        layer="narrative",
        text=text,
        reason=f"narrative chunk, rank {rank}",
        why={"final_rank": rank},
        ref={"turn_id": rank, "chunk_id": f"c{rank}"},
    )


def test_excerpt_items_keeps_the_best_whole_and_says_what_it_did():
    items = [item(LONG.replace("turn 7", f"turn {n}"), n) for n in range(1, 5)]
    done = excerpt_items(items, query_text="the crates in the cellar", keep_whole=2)
    assert done == 2
    assert [i.text for i in items[:2]] == [LONG.replace("turn 7", f"turn {n}") for n in (1, 2)]
    tail = items[2]
    assert tail.text == (
        "(turn 3) Mira: […] I counted the crates of salt in the cellar twice before dawn. "
        "The dogs barked somewhere far off and nobody came to see why. […]"
    )
    assert tail.tokens == count_tokens(tail.text) < count_tokens(LONG)
    record = tail.why["excerpt"]
    assert record["whole_tokens"] == count_tokens(LONG.replace("turn 7", "turn 3")) and record["tokens"] == tail.tokens
    assert record["segments_kept"] == [2, 3] and record["segments"] == 4 and record["terms"] == ["cellar", "crat"]
    assert tail.ref == {"turn_id": 3, "chunk_id": "c3"}  # still names the chunk it comes from
    assert "excerpted for this action: sentences 2, 3 of 4" in tail.reason and f"→ {tail.tokens} tokens" in tail.reason
    assert excerpt_items(items, query_text="the crates in the cellar", keep_whole=2) == 0  # never excerpted twice


GOODS = [
    "salt",
    "silk",
    "rum",
    "tea",
    "wool",
    "iron",
    "wine",
    "amber",
    "pepper",
    "cloth",
    "glass",
    "copper",
    "tin",
    "oil",
    "grain",
    "hides",
    "soap",
    "wax",
]


@pytest.fixture
def long_turns(game_save, vector_memory):
    """A classic save of 18 turns of four sentences, each naming the crates once."""
    Event.objects.filter(game_save=game_save).delete()
    texts = {}
    for turn, good in enumerate(GOODS, 1):
        texts[turn] = (
            f"The lamps of the harbour burned low on night {turn}. "
            f"Mira counted {turn + 2} crates of {good} in the cellar. "
            f"Somewhere a bell rang {turn} times and fell silent. "
            f"The watchman yawned and walked on along the wall."
        )
        Event.objects.create(game_save=game_save, turn_id=turn, player_input="", narrative=texts[turn])
    game_save.current_turn = len(GOODS)
    game_save.save()
    vector_memory.embed_chunks(game_save.save_id, [{"turn_id": t, "text": x} for t, x in texts.items()])
    return game_save


def test_more_memories_fit_and_the_budget_is_used(long_turns):
    whole = count_tokens("(turn 10) " + Event.objects.get(game_save=long_turns, turn_id=10).narrative)
    budget = 8 * whole
    context = build_memory_context(
        game_save=long_turns, query_text="How many crates did Mira count?", token_budget=budget, k_narrative=3
    )
    narrative = [i for i in context.items if i.layer == "narrative"]
    taken = [i for i in narrative if i.included]
    assert len(taken) > budget // whole  # more distinct memories than whole chunks could give
    ranked = sorted(narrative, key=lambda i: i.why["final_rank"])
    assert all("excerpt" not in i.why for i in ranked[:3])  # the best k_narrative stay whole
    excerpts = [i for i in taken if i.why.get("excerpt")]
    assert excerpts and all("crates" in i.text and i.text.count("[…]") == 2 for i in excerpts)
    for excerpt in excerpts:  # whole sentences of the turn, nothing cut inside one
        sentences = excerpt.text.split("[…] ")[1].removesuffix(" […]")
        assert (
            sentences.startswith("Mira counted")
            and sentences.endswith(".")
            and sentences in Event.objects.get(game_save=long_turns, turn_id=excerpt.ref["turn_id"]).narrative
        )
    assert context.used_tokens <= budget
    assert budget - context.used_tokens < min(
        i.tokens for i in narrative if not i.included
    )  # nothing that fits is left
    assert any("excerpted" in note for note in context.notes) and "excerpt_ms" in context.timings


def test_excerpts_are_deterministic(long_turns):
    def build():
        return build_memory_context(
            game_save=long_turns, query_text="How many crates did Mira count?", token_budget=300, k_narrative=3
        )

    first, second = build(), build()
    assert [(i.text, i.included, i.cut) for i in first.items] == [(i.text, i.included, i.cut) for i in second.items]


def test_nothing_is_excerpted_when_every_chunk_fits_whole(long_turns):
    context = build_memory_context(
        game_save=long_turns, query_text="How many crates did Mira count?", token_budget=20_000, k_narrative=3
    )
    narrative = [i for i in context.items if i.layer == "narrative"]
    assert narrative and all(i.included and "excerpt" not in i.why for i in narrative)
    assert "excerpt_ms" not in context.timings


def test_a_chunk_is_dated_once_by_its_story_time_heading_else_by_its_turn(long_turns):
    from studio.world.models import StateCache

    for turn in range(1, 10):  # the first nine turns carry story time, the rest none
        StateCache.objects.create(game_save=long_turns, turn_id=turn, state={"date": "8 May, 2023"})
    context = build_memory_context(
        game_save=long_turns, query_text="How many crates did Mira count?", token_budget=20_000, k_narrative=3
    )
    narrative = {i.ref["turn_id"]: i for i in context.items if i.layer == "narrative"}
    assert set(narrative) == set(range(1, 19))
    for turn, item in narrative.items():
        dated = turn < 10
        assert item.text.startswith("(turn ") != dated and item.ref["turn_id"] == turn
        assert item.tokens == count_tokens(item.text)
    text = context.text
    assert "[8 May, 2023]\n- The lamps of the harbour burned low on night 1." in text
    assert "- (turn 10) The lamps of the harbour burned low on night 10." in text

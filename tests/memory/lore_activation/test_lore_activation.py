"""Conformance table for the lore activation engine: one case per World Info / CCv3 rule.

Each case names the rule (docs/authoring.md "Lore activation" lists the source lines) and
states which entries a turn activates. Units are SillyTavern's: messages, with the pending
input as message 1, then each earlier turn's narrative and player input.
"""

from __future__ import annotations

import pytest

from studio.memory.lore_activation import (
    AND_ALL,
    AND_ANY,
    NOT_ALL,
    NOT_ANY,
    CompiledBook,
    LoreDefaults,
    LoreSpec,
    LoreState,
    activate,
    activation_seed,
    key_errors,
    parse_regex_key,
    scan_messages,
)

TURNS = [
    (1, "I look for the smuggler", "A hooded figure waits by the crates."),
    (2, "I walk to the harbour", "The gulls circle over Port Vey."),
]


def run(specs, pending="", *, turns=TURNS, turn=None, state=None, defaults=None, seed="save:0"):
    book = CompiledBook(specs, defaults or LoreDefaults())
    turn = turn if turn is not None else (max((t[0] for t in turns), default=0) + 1)
    return activate(
        book=book, messages=scan_messages(pending_input=pending, turns=turns), turn=turn, state=state, seed=seed
    )


def E(entry_id, text="", **fields):  # noqa: N802 - a short constructor keeps the table readable
    return LoreSpec(entry_id=entry_id, title=entry_id.upper(), text=text, **fields)


CASES = [
    # --- keys -----------------------------------------------------------------------------
    ("plain key, case-insensitive substring", [E("a", keys=("vey",))], "", {"a"}),
    ("case-sensitive entry misses other case", [E("a", keys=("port vey",), case_sensitive=True)], "", set()),
    ("case-sensitive entry matches same case", [E("a", keys=("Port Vey",), case_sensitive=True)], "", {"a"}),
    ("universe default case-sensitive", [E("a", keys=("port vey",))], "", set(), LoreDefaults(case_sensitive=True)),
    (
        "whole words: one-word key needs word bounds",
        [E("a", keys=("king",), match_whole_words=True)],
        "it is not to my liking",
        set(),
    ),
    (
        "whole words: one-word key at bounds",
        [E("a", keys=("king",), match_whole_words=True)],
        "long live the king.",
        {"a"},
    ),
    (
        "whole words: multi-word key is a substring (SillyTavern)",
        [E("a", keys=("king arthur",), match_whole_words=True)],
        "the viking arthurs sail",
        {"a"},
    ),
    ("whole words: JavaScript \\w is ASCII only", [E("a", keys=("k",), match_whole_words=True)], "die königin", {"a"}),
    ("universe default whole words", [E("a", keys=("king",))], "liking", set(), LoreDefaults(match_whole_words=True)),
    ("regex key with i flag", [E("a", keys=("/drag(on|ons)/i",))], "Here be DRAGONS", {"a"}),
    ("regex key without i is case-sensitive", [E("a", keys=("/Dragon/",))], "a dragon", set()),
    ("regex y flag anchors at the buffer start", [E("a", keys=("/\\x01hello/y",))], "well hello", set()),
    ("regex y flag at the buffer start", [E("a", keys=("/\\x01hello/y",))], "hello there", {"a"}),
    ("regex m flag: ^ and $ per line", [E("a", keys=("/^salt$/m",))], "pepper\nsalt\nsugar", {"a"}),
    ("regex named group (JavaScript syntax)", [E("a", keys=("/(?<w>ha)\\k<w>/",))], "hahaha", {"a"}),
    ("regex-shaped invalid key is plain text", [E("a", keys=("/foo(/",))], "path /foo(/ here", {"a"}),
    ("{{user}} in a key is filled in", [E("a", keys=("{{user}}",))], "Mira waves", set()),  # no macros given
    # --- secondary logic ----------------------------------------------------------------------
    ("AND ANY holds", [E("a", keys=("vey",), secondary_keys=("gulls", "nope"), selective_logic=AND_ANY)], "", {"a"}),
    ("AND ANY fails", [E("a", keys=("vey",), secondary_keys=("nope",), selective_logic=AND_ANY)], "", set()),
    ("AND ALL holds", [E("a", keys=("vey",), secondary_keys=("gulls", "circle"), selective_logic=AND_ALL)], "", {"a"}),
    ("AND ALL fails", [E("a", keys=("vey",), secondary_keys=("gulls", "nope"), selective_logic=AND_ALL)], "", set()),
    ("NOT ANY holds", [E("a", keys=("vey",), secondary_keys=("nope",), selective_logic=NOT_ANY)], "", {"a"}),
    ("NOT ANY fails", [E("a", keys=("vey",), secondary_keys=("gulls", "nope"), selective_logic=NOT_ANY)], "", set()),
    ("NOT ALL holds", [E("a", keys=("vey",), secondary_keys=("gulls", "nope"), selective_logic=NOT_ALL)], "", {"a"}),
    ("NOT ALL fails", [E("a", keys=("vey",), secondary_keys=("gulls", "circle"), selective_logic=NOT_ALL)], "", set()),
    (
        "selective off ignores secondary keys",
        [E("a", keys=("vey",), secondary_keys=("nope",), selective=False)],
        "",
        set() | {"a"},
    ),
    ("secondary keys may be regex", [E("a", keys=("vey",), secondary_keys=("/G[ul]+S/i",))], "", {"a"}),
    # --- scan depth ---------------------------------------------------------------------------
    ("depth 2 = pending input + last narrative", [E("a", keys=("gulls",))], "", {"a"}),
    ("depth 2 excludes the last player input", [E("a", keys=("harbour",))], "", set()),
    ("depth 3 includes the last player input", [E("a", keys=("harbour",), scan_depth=3)], "", {"a"}),
    ("depth 1 is the pending input only", [E("a", keys=("gulls",), scan_depth=1)], "", set()),
    ("depth 1 sees the pending input", [E("a", keys=("lantern",), scan_depth=1)], "a lantern", {"a"}),
    ("depth 0 scans nothing", [E("a", keys=("lantern",), scan_depth=0)], "a lantern", set()),
    ("universe scan depth", [E("a", keys=("hooded",))], "", {"a"}, LoreDefaults(scan_depth=4)),
    # --- constant, disabled, forced ----------------------------------------------------------
    ("constant without keys", [E("a", constant=True)], "", {"a"}),
    ("disabled constant", [E("a", constant=True, enabled=False)], "", set()),
    ("disabled key entry", [E("a", keys=("vey",), enabled=False)], "port vey", set()),
    ("no keys, not constant", [E("a")], "anything", set()),
    ("@@activate", [E("a", forced="activate")], "", {"a"}),
    ("@@dont_activate beats constant", [E("a", constant=True, forced="dont_activate")], "", set()),
    # --- recursion -----------------------------------------------------------------------------
    (
        "recursion through an entry's text",
        [E("a", "Mira knows Kael.", keys=("lantern",)), E("b", keys=("kael",))],
        "a lantern",
        {"a", "b"},
    ),
    (
        "recursion depth 0: no recursion",
        [E("a", "Mira knows Kael.", keys=("lantern",)), E("b", keys=("kael",))],
        "a lantern",
        {"a"},
        LoreDefaults(recursion_depth=0),
    ),
    (
        "recursion depth 1 stops after one level",
        [E("a", "Kael", keys=("lantern",)), E("b", "Oren", keys=("kael",)), E("c", keys=("oren",))],
        "a lantern",
        {"a", "b"},
        LoreDefaults(recursion_depth=1),
    ),
    (
        "recursion depth 2 reaches the second level",
        [E("a", "Kael", keys=("lantern",)), E("b", "Oren", keys=("kael",)), E("c", keys=("oren",))],
        "a lantern",
        {"a", "b", "c"},
        LoreDefaults(recursion_depth=2),
    ),
    (
        "exclude recursion: not activated by another entry",
        [E("a", "Kael", keys=("lantern",)), E("b", keys=("kael",), exclude_recursion=True)],
        "a lantern",
        {"a"},
    ),
    (
        "exclude recursion: still activated by the chat",
        [E("a", "Kael", keys=("lantern",)), E("b", keys=("kael",), exclude_recursion=True)],
        "lantern for kael",
        {"a", "b"},
    ),
    (
        "prevent recursion: its text activates nothing",
        [E("a", "Kael", keys=("lantern",), prevent_recursion=True), E("b", keys=("kael",))],
        "a lantern",
        {"a"},
    ),
    (
        "delay until recursion: activated in the recursion pass",
        [E("a", "x", constant=True), E("d", keys=("lantern",), delay_until_recursion=1)],
        "a lantern",
        {"a", "d"},
    ),
    (
        "delay until recursion: no recursion pass, no activation",
        [E("a", "x", constant=True), E("d", keys=("lantern",), delay_until_recursion=1)],
        "a lantern",
        {"a"},
        LoreDefaults(recursion_depth=0),
    ),
    (
        "delay until recursion level 2 waits for level 1",
        [E("a", "Kael", keys=("lantern",), delay_until_recursion=1), E("b", keys=("kael",), delay_until_recursion=2)],
        "a lantern",
        {"a", "b"},
    ),
    # --- inclusion groups -----------------------------------------------------------------------
    (
        "group with prioritise: highest order wins",
        [
            E("a", keys=("vey",), inclusion_group="g", group_prioritize=True, insertion_order=10),
            E("b", keys=("vey",), inclusion_group="g", group_prioritize=True, insertion_order=90),
            E("c", keys=("vey",), inclusion_group="g", insertion_order=200),
        ],
        "",
        {"b"},
    ),
    (
        "group without prioritise: the weighted draw (weight 0 never wins)",
        [E("a", keys=("vey",), inclusion_group="g", group_weight=0), E("b", keys=("vey",), inclusion_group="g")],
        "",
        {"b"},
    ),
    (
        "an entry in two groups",
        [
            E("a", keys=("vey",), inclusion_group="g, h", group_prioritize=True),
            E("b", keys=("vey",), inclusion_group="h"),
            E("c", keys=("vey",), inclusion_group="g"),
        ],
        "",
        {"a"},
    ),
    (
        "group won in an earlier pass blocks later members",
        [E("a", "Kael", keys=("lantern",), inclusion_group="g"), E("b", keys=("kael",), inclusion_group="g")],
        "a lantern",
        {"a"},
    ),
    (
        "group scoring: more matched keys wins",
        [
            E("a", keys=("song", "sing", "black cat"), inclusion_group="g", group_scoring=True),
            E("b", keys=("song", "sing", "ghosts"), inclusion_group="g", group_scoring=True),
        ],
        "sing me a song about ghosts",
        {"b"},
    ),
    # --- probability ----------------------------------------------------------------------------
    ("probability 0", [E("a", keys=("vey",), probability=0)], "", set()),
    ("probability 100", [E("a", keys=("vey",), probability=100)], "", {"a"}),
    ("probability off ignores 0", [E("a", keys=("vey",), probability=0, use_probability=False)], "", {"a"}),
    # --- CCv3 decorators -----------------------------------------------------------------------
    ("@@additional_keys needs one of the group", [E("a", keys=("vey",), additional_keys=(("gulls", "x"),))], "", {"a"}),
    ("@@additional_keys missing", [E("a", keys=("vey",), additional_keys=(("nope",),))], "", set()),
    ("@@exclude_keys present blocks", [E("a", keys=("vey",), exclude_keys=("gulls",))], "", set()),
    ("@@exclude_keys absent", [E("a", keys=("vey",), exclude_keys=("nope",))], "", {"a"}),
    ("@@activate_only_after 2 at turn 3 (2 narrations)", [E("a", constant=True, activate_only_after=2)], "", {"a"}),
    ("@@activate_only_after 3 at turn 3", [E("a", constant=True, activate_only_after=3)], "", set()),
    ("@@activate_only_every 2 at turn 3", [E("a", constant=True, activate_only_every=2)], "", {"a"}),
    ("@@activate_only_every 3 at turn 3", [E("a", constant=True, activate_only_every=3)], "", set()),
    # --- cases added with the context assembly (issue 12, lore2) ------------------------------
    ("regex s flag: . matches a line break", [E("a", keys=("/salt.water/s",))], "salt\nwater", {"a"}),
    ("regex without s: . stops at a line break", [E("a", keys=("/salt.water/",))], "salt\nwater", set()),
    ("regex g and u flags are accepted", [E("a", keys=("/gull/gu",))], "a gull", {"a"}),
    (
        "regex key matches recursion text",
        [E("a", "The Drowned Bell rings.", keys=("lantern",)), E("b", keys=("/drowned\\s+bell/i",))],
        "a lantern",
        {"a", "b"},
    ),
    (
        "case-sensitive secondary key misses other case",
        [E("a", keys=("vey",), secondary_keys=("Gulls",), case_sensitive=True)],
        "",
        set(),
    ),
    (
        "whole words apply to secondary keys",
        [E("a", keys=("vey",), secondary_keys=("gull",), match_whole_words=True)],
        "",
        set(),
    ),
    ("scan depth larger than the chat scans all of it", [E("a", keys=("smuggler",), scan_depth=50)], "", {"a"}),
    (
        "scan depth 4 reaches the first narrative, 3 does not",
        [E("a", keys=("hooded",), scan_depth=4), E("b", keys=("hooded",), scan_depth=3)],
        "",
        {"a"},
    ),
    (
        "the pending input counts toward the scan depth",
        [E("a", keys=("gulls",), scan_depth=2)],
        "the gulls again",
        {"a"},
    ),
    (
        "prevent recursion: still activated by the chat itself",
        [E("a", "Kael", keys=("lantern",), prevent_recursion=True), E("b", keys=("kael",))],
        "lantern and kael",
        {"a", "b"},
    ),
    ("group with one member is no contest", [E("a", keys=("vey",), inclusion_group="g")], "", {"a"}),
    (
        "prioritised group: ties keep one winner",
        [
            E("a", keys=("vey",), inclusion_group="g", group_prioritize=True, insertion_order=50),
            E("b", keys=("vey",), inclusion_group="g", group_prioritize=True, insertion_order=50),
        ],
        "",
        {"a"},
    ),
    ("probability 0 on a constant entry", [E("a", constant=True, probability=0)], "", set()),
    ("@@dont_activate beats a key match", [E("a", keys=("vey",), forced="dont_activate")], "", set()),
    (
        "@@ignore_on_max_context is dropped first over budget",
        [
            E("a", keys=("vey",), token_count=60, insertion_order=300, ignore_on_max_context=True),
            E("b", keys=("vey",), token_count=60, insertion_order=10),
        ],
        "",
        {"b"},
        LoreDefaults(token_budget=100),
    ),
    # --- budget --------------------------------------------------------------------------------
    (
        "budget: the entry that reaches it is left out, ignore-budget stays",
        [
            E("a", keys=("vey",), token_count=60, insertion_order=300),
            E("b", keys=("vey",), token_count=60),
            E("c", keys=("vey",), token_count=60, ignore_budget=True, insertion_order=10),
        ],
        "",
        {"a", "c"},
        LoreDefaults(token_budget=100),
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_rule(case):
    name, specs, pending, expected, *rest = case
    result = run(specs, pending, defaults=rest[0] if rest else None)
    assert set(result.activated_ids) == expected, [e.reasons for e in result.explanations.values()]
    assert set(result.explanations) == {s.entry_id for s in specs}  # every entry is explained
    for spec in specs:
        record = result.explanations[spec.entry_id]
        assert record.included == (spec.entry_id in expected)
        assert record.reasons, f"{spec.entry_id} has no reason"


# --- timed effects: boundaries across turns --------------------------------------------------


def play(specs, inputs, *, defaults=None):
    """Run consecutive turns 1..n with the given pending inputs; return activated ids per turn."""
    book = CompiledBook(specs, defaults or LoreDefaults())
    state, history, out = None, [], []
    for turn, pending in enumerate(inputs, start=1):
        result = activate(
            book=book,
            messages=scan_messages(pending_input=pending, turns=history),
            turn=turn,
            state=state,
            seed=f"s:0:{turn}",
        )
        out.append(set(result.activated_ids))
        state = result.state
        history.append((turn, pending, "The narrator answers."))
    return out, state


@pytest.mark.parametrize(
    "sticky, expected",
    [
        (2, [{"a"}, set(), set()]),  # end = clock 1 + 2 = 3; turn 2 is at clock 3: over
        (3, [{"a"}, {"a"}, set()]),  # turn 2 (clock 3) < 4: still sticky
        (5, [{"a"}, {"a"}, {"a"}]),
    ],
)
def test_sticky_window_in_messages(sticky, expected):
    out, _ = play([E("a", keys=("bell",), sticky=sticky, scan_depth=1)], ["the bell", "", ""])
    assert out == expected


@pytest.mark.parametrize(
    "cooldown, expected",
    [
        (2, [{"a"}, {"a"}, {"a"}]),  # cooldown ends at clock 3 = turn 2
        (3, [{"a"}, set(), {"a"}]),  # turn 2 (clock 3) < 4: cooling down
    ],
)
def test_cooldown_window(cooldown, expected):
    out, _ = play([E("a", keys=("bell",), cooldown=cooldown, scan_depth=1)], ["bell", "bell", "bell"])
    assert out == expected


def test_sticky_then_cooldown_starts_when_sticky_ends():
    out, _ = play([E("a", keys=("bell",), sticky=3, cooldown=2, scan_depth=1)], ["bell", "", "bell", "bell"])
    # turn 2 sticky; turn 3 the sticky window ends and a protected cooldown starts; turn 4 free.
    assert out == [{"a"}, {"a"}, set(), {"a"}]


@pytest.mark.parametrize(
    "delay, expected",
    [
        (3, [set(), {"a"}]),  # turn 2 is at clock 3: not < 3
        (4, [set(), set()]),
    ],
)
def test_delay_counts_messages(delay, expected):
    out, _ = play([E("a", keys=("bell",), delay=delay, scan_depth=1)], ["bell", "bell"])
    assert out == expected


def test_sticky_skips_probability_and_its_explanation_counts_turns():
    book = CompiledBook([E("a", keys=("bell",), sticky=5, probability=100, scan_depth=1)], LoreDefaults())
    first = activate(book=book, messages=scan_messages(pending_input="bell", turns=[]), turn=1, state=None, seed="x")
    second = activate(
        book=book,
        messages=scan_messages(pending_input="", turns=[(1, "bell", "")]),
        turn=2,
        state=first.state,
        seed="y",
    )
    record = second.explanations["a"]
    assert record.code == "sticky" and "since turn 1" in record.reasons[0] and "1 more turn" in record.reasons[0]


def test_editing_an_entry_drops_its_timed_effect():
    book = CompiledBook([E("a", keys=("bell",), sticky=5, scan_depth=1)], LoreDefaults())
    first = activate(book=book, messages=scan_messages(pending_input="bell", turns=[]), turn=1, state=None, seed="x")
    edited = CompiledBook([E("a", "new text", keys=("bell",), sticky=5, scan_depth=1)], LoreDefaults())
    second = activate(
        book=edited, messages=scan_messages(pending_input="", turns=[]), turn=2, state=first.state, seed="y"
    )
    assert second.activated_ids == []


def test_keep_activate_after_match_and_dont_activate_after_match():
    specs = [
        E("k", keys=("bell",), after_first_match="keep", scan_depth=1),
        E("s", keys=("bell",), after_first_match="stop", scan_depth=1),
    ]
    out, state = play(specs, ["bell", "", "bell"])
    assert out == [{"k", "s"}, {"k"}, {"k"}]
    assert state.first_matched == {"k": 1, "s": 1}


def test_state_round_trips_through_json():
    _, state = play([E("a", keys=("bell",), sticky=7, cooldown=9, after_first_match="keep")], ["bell"])
    assert LoreState.from_dict(state.to_dict()) == state


# --- explanations ------------------------------------------------------------------------------


def test_explanation_names_key_turn_and_recursion_source():
    result = run([E("a", "Mira knows Kael.", keys=("gulls",)), E("b", keys=("kael",)), E("c", keys=("harbour",))])
    a, b, c = (result.explanations[x] for x in "abc")
    assert a.matched_key == "gulls" and a.matched_in == "turn 2 (narrative)"
    assert b.code == "recursion" and b.via_entry == "a" and "“A” (recursion)" in b.matched_in
    assert c.code == "beyond_scan_depth" and "turn 2 (player input)" in c.reasons[0]


def test_explanation_of_group_and_probability_and_secondary():
    result = run(
        [
            E("a", keys=("vey",), inclusion_group="g", group_prioritize=True),
            E("b", keys=("vey",), inclusion_group="g"),
            E("p", keys=("vey",), probability=0),
            E("s", keys=("vey",), secondary_keys=("nope",), selective_logic=AND_ALL),
        ]
    )
    assert "won inclusion group “g” by priority" in " ".join(result.explanations["a"].reasons)
    assert result.explanations["b"].code == "group" and result.explanations["b"].rivals == ["a"]
    p = result.explanations["p"]
    assert p.code == "probability" and p.threshold == 0 and p.roll > 0
    assert result.explanations["s"].code == "secondary" and "AND ALL" in result.explanations["s"].reasons[0]


# --- determinism ---------------------------------------------------------------------------------


def test_same_seed_same_activations_and_turns_differ():
    specs = [E(f"e{i}", keys=("vey",), probability=50) for i in range(40)]
    specs += [E(f"g{i}", keys=("vey",), inclusion_group="g") for i in range(5)]
    seed = activation_seed(save_id="abc", generation=0, turn=3)
    first = run(specs, seed=seed)
    again = run(specs, seed=seed)
    assert first.activated_ids == again.activated_ids
    assert {k: v.roll for k, v in first.explanations.items()} == {k: v.roll for k, v in again.explanations.items()}
    other_turn = run(specs, seed=activation_seed(save_id="abc", generation=0, turn=4))
    other_generation = run(specs, seed=activation_seed(save_id="abc", generation=1, turn=3))
    assert first.activated_ids != other_turn.activated_ids
    assert first.activated_ids != other_generation.activated_ids
    assert 0 < sum(1 for i in first.activated_ids if i.startswith("e")) < 40
    assert sum(1 for i in first.activated_ids if i.startswith("g")) == 1


def test_prompt_order_is_insertion_order():
    result = run(
        [
            E("late", keys=("vey",), insertion_order=300),
            E("early", keys=("vey",), insertion_order=5),
            E("mid", constant=True, insertion_order=100),
        ]
    )
    assert result.activated_ids == ["early", "mid", "late"]


# --- regex validation -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "key, fragment",
    [
        ("/foo(/", "does not compile"),
        ("/a/b/", "must be escaped"),
        ("/dragon/x", "unknown flag x"),
    ],
)
def test_regex_key_errors_name_the_key(key, fragment):
    errors = key_errors(["plain", key])
    assert len(errors) == 1 and f"“{key}”" in errors[0] and fragment in errors[0]


def test_plain_keys_are_not_regex():
    assert parse_regex_key("Port Vey") == (None, "")
    assert parse_regex_key("/") == (None, "")
    compiled, why = parse_regex_key("/a\\/b/gi")
    assert why == "" and compiled.search("A/B") is not None


def test_regex_match_names_the_message():
    result = run([E("a", keys=("/GULLS\\s+circle/i",))])
    assert result.explanations["a"].matched_in == "turn 2 (narrative)"


def test_user_and_char_macros_in_keys_are_filled_from_the_book():
    book = CompiledBook(
        [E("a", keys=("{{user}}",)), E("b", keys=("{{char}}'s lamp",))],
        LoreDefaults(),
        {"user": "Wren", "char": "Hesper"},
    )
    result = activate(
        book=book,
        messages=scan_messages(pending_input="Wren lights Hesper's lamp", turns=[]),
        turn=1,
        state=None,
        seed="s",
    )
    assert set(result.activated_ids) == {"a", "b"}
    assert result.explanations["a"].reasons[0] == "matched key “{{user}}” in the pending input"


def test_a_sticky_member_wins_its_group_on_later_turns():
    specs = [
        E("a", keys=("lantern",), inclusion_group="g", sticky=4),
        E("b", keys=("vey",), inclusion_group="g", group_prioritize=True, insertion_order=999),
    ]
    book = CompiledBook(specs, LoreDefaults())
    first = activate(
        book=book, messages=scan_messages(pending_input="a lantern", turns=[]), turn=1, state=None, seed="s"
    )
    second = activate(
        book=book, messages=scan_messages(pending_input="port vey", turns=[]), turn=2, state=first.state, seed="s"
    )
    assert first.activated_ids == ["a"] and second.activated_ids == ["a"]
    loser = second.explanations["b"]
    assert loser.code == "group" and "lost inclusion group “g” to sticky “A”" in loser.reasons
    # Once the sticky window is over, the prioritised member wins again.
    later = activate(
        book=book, messages=scan_messages(pending_input="port vey", turns=[]), turn=4, state=second.state, seed="s"
    )
    assert later.activated_ids == ["b"]

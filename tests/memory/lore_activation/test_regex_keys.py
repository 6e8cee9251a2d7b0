"""Regex keys run in bounded time: RE2 where it can run the pattern's meaning, else `regex` with a limit.

Also: the compiled-book cache follows every default, and the delay explanation counts the
messages the rule counts. No timing is asserted: a catastrophic key must simply let the
evaluation finish and say that the key ran out of time.
"""

from __future__ import annotations

import re

import pytest

from studio.memory.lore_activation import (
    ENGINE_RE2,
    ENGINE_REGEX,
    CompiledBook,
    LoreDefaults,
    LoreSpec,
    RegexBudget,
    activate,
    compiled_book,
    key_hazards,
    parse_regex_key,
    regex_key_hazard,
    scan_messages,
)
from studio.memory.lore_activation.regex_keys import (
    REGEX_BUDGET,
    REGEX_TIMEOUT,
    _compile_flags,
    _js_to_python,
    _split_key,
)

from tests.support.regex_bombs import BOMB, BOMB_TEXT, bomb_keys


def E(entry_id, text="", **fields):  # noqa: N802 - a short constructor keeps the cases readable
    return LoreSpec(entry_id=entry_id, title=entry_id.upper(), text=text, **fields)


def evaluate(specs, pending, *, turns=(), turn=1, defaults=None):
    book = CompiledBook(specs, defaults or LoreDefaults())
    return activate(
        book=book, messages=scan_messages(pending_input=pending, turns=list(turns)), turn=turn, state=None, seed="s"
    )


# --- the same meaning on RE2 -----------------------------------------------------------------

KEYS = [
    "/drag(on|ons)/i",
    "/Dragon/",
    "/\\x01hello/y",
    "/^salt$/m",
    "/salt.water/s",
    "/salt.water/",
    "/gull/gu",
    "/G[ul]+S/i",
    "/a\\/b/gi",
    "/(a+)+$/",
    "/a{,3}b/",
    "/ſ/i",
    "/K/i",
    "/end$/",
    "/[^a-c]x/i",
    "/(?i:ab)C/",
    "/(?s:a.)b./",
    "/x{2,5}?y/",
    "/\\u00e9t\\u00e9/i",
    "/(ab+c)+/",
    "/ÉTÉ/i",
    "/\\.\\*\\?/",
    "/a\\Z/",
    "/^a|b$/",
    "/[a-m]|[h-z]/",
    "/(?m:^b)/",
    "/(?-i:a)b/i",
    "/\\x01\\S/",
]
TEXTS = [
    "",
    "Here be DRAGONS",
    "a dragon",
    "\x01hello there",
    "pepper\nsalt\nsugar",
    "salt\nwater",
    "a gull",
    "aaaa!",
    "aaa\n",
    "b",
    "aab",
    "abc",
    "ſ",
    "s",
    "S",
    "k",
    "K",
    "K",
    "the end\n",
    "the end",
    "end\n\n",
    "dx",
    "Dx",
    "ABC",
    "abC",
    "a\nbc",
    "xxxxxy",
    "été",
    "ÉTÉ",
    "a.*?",
    "a",
    "a\n",
    "abcabbc",
    "zz",
    "Ab",
    "AB",
    "\x01x",
]


@pytest.mark.parametrize("key", KEYS)
def test_a_key_finds_the_same_matches_as_pythons_re(key):
    compiled, why = parse_regex_key(key)
    assert why == ""
    (pattern, flags), _ = _split_key(key)
    python = re.compile(_js_to_python(pattern), _compile_flags(flags))
    for text in TEXTS:
        expected = python.match(text) if "y" in flags else python.search(text)
        found = compiled.search(text)
        assert (found.start() if found else None) == (expected.start() if expected else None), (key, text)


@pytest.mark.parametrize(
    "key, engine",
    [
        ("/(a+)+$/", ENGINE_RE2),  # the issue's key: linear on RE2
        ("/drag(on|ons)/i", ENGINE_RE2),
        ("/\\bking\\b/i", ENGINE_REGEX),  # RE2's \b is ASCII-only
        ("/drowned\\s+bell/i", ENGINE_REGEX),
        ("/(?<w>ha)\\k<w>/", ENGINE_REGEX),  # a back-reference
        ("/a(?=b)/", ENGINE_REGEX),  # look-ahead
    ],
)
def test_what_runs_a_key(key, engine):
    assert parse_regex_key(key)[0].engine == engine


def test_the_issues_key_and_input_end_on_re2_without_a_match():
    result = evaluate([E("a", keys=("/(a+)+$/",))], "a" * 29 + "!")
    assert result.activated_ids == [] and result.regex_timeouts == []
    assert evaluate([E("a", keys=("/(a+)+$/",))], "a" * 29).activated_ids == ["a"]


def test_a_text_with_a_lone_surrogate_is_searched_too():
    # RE2 reads UTF-8, which cannot hold a lone surrogate: the key falls back to the bounded engine.
    compiled, _why = parse_regex_key("/drag(on|ons)/i")
    assert compiled.engine == ENGINE_RE2 and compiled.search("\ud800 the DRAGONS").start() == 6
    result = evaluate([E("a", keys=("/drag(on|ons)/i",))], "\ud800 here be dragons")
    assert result.activated_ids == ["a"]


# --- a key past its limit ----------------------------------------------------------------------


def test_a_key_past_its_time_limit_counts_as_not_matching_and_says_so():
    result = evaluate([E("bomb", keys=(BOMB,)), E("plain", keys=("aaa",))], BOMB_TEXT)
    assert result.activated_ids == ["plain"]
    assert result.regex_timeouts == [BOMB]
    record = result.explanations["bomb"]
    assert not record.included and record.regex_timeouts == [BOMB]
    assert any("ran past its 100 ms limit and counts as not matching" in reason for reason in record.reasons)
    assert result.explanations["plain"].regex_timeouts == []


def test_a_secondary_key_past_its_limit_is_reported_on_its_entry():
    result = evaluate([E("a", keys=("aaa",), secondary_keys=(BOMB,))], BOMB_TEXT)
    record = result.explanations["a"]
    assert record.code == "secondary" and record.regex_timeouts == [BOMB]


def test_many_keys_past_their_limit_share_one_budget_per_evaluation(limit_hits):
    # Before: every key paid the full limit (300 such keys = 30 s for one /context).
    keys = bomb_keys(25)
    specs = [E(f"e{n}", keys=(key,)) for n, key in enumerate(keys)] + [
        E("plain", keys=("aaa",)),
        E("re2", keys=("/a{3}/",)),
    ]
    result = evaluate(specs, BOMB_TEXT)
    assert 0 < len(limit_hits) <= int(REGEX_BUDGET / REGEX_TIMEOUT) + 1
    assert result.activated_ids == ["plain", "re2"]  # RE2 keys still run once the budget is spent
    assert result.regex_timeouts == sorted(keys)  # every key is reported, searched or not
    for n, key in enumerate(keys):
        assert result.explanations[f"e{n}"].regex_timeouts == [key] and not result.explanations[f"e{n}"].included
    reasons = [reason for n in range(len(keys)) for reason in result.explanations[f"e{n}"].reasons]
    assert any("was spent; it counts as not matching" in reason for reason in reasons)


def test_a_shared_budget_tries_a_timed_out_key_once(limit_hits):
    book = CompiledBook([E("bomb", keys=(BOMB,)), E("plain", keys=("aaa",))], LoreDefaults())
    budget = RegexBudget(30)
    for turn in range(1, 6):
        result = activate(
            book=book,
            messages=scan_messages(pending_input=BOMB_TEXT, turns=[]),
            turn=turn,
            state=None,
            seed="s",
            regex_budget=budget,
        )
        assert result.activated_ids == ["plain"] and result.regex_timeouts == [BOMB]
    assert limit_hits == [BOMB] and budget.limit_hits == 1
    assert any("earlier in this replay" in reason for reason in result.explanations["bomb"].reasons)


def test_a_regex_budget_must_be_positive():
    with pytest.raises(ValueError, match="positive number of seconds"):
        RegexBudget(0)


# --- catastrophic shapes -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "key, refused",
    [
        ("/^(\\w+\\s?)+$/", True),
        ("/(a|aa)+\\b$/", True),
        ("/(x+x+)+y\\b/", True),
        ("/(\\d+)+\\b/", True),
        ("/(a?a)+\\b/", True),
        ("/([a-z]+\\s?)+\\bfoo/", True),
        ("/(\\w+)*@\\b/", True),
        ("/(\\w+\\s)+$/", False),  # each repeat ends at a space: one way to split
        ("/\\b(dragon|wyrm)s?\\b/i", False),
        ("/(a|ab)+c\\b/", False),
        ("/(\\s*,\\s*\\w+)+/", False),
        ("/(ba+)+\\b/", False),
        ("/(\\w+\\s?){1,10}!/", True),  # bounded repeats take about n**k steps on a backtracking engine
        ("/(a+){2,9}$/", True),
        ("/(a+){1,2}$/", False),  # two iterations: at most quadratic
        ("/(a+)+$/", True),  # the issue's key: linear on RE2 here, exponential where it is exported to
        ("Port Vey", False),
        ("/foo(/", False),  # does not compile: key_errors speaks for it
    ],
)
def test_catastrophic_keys_are_named(key, refused):
    assert bool(regex_key_hazard(key)) is refused
    messages = key_hazards(["plain", key])
    assert len(messages) == (1 if refused else 0)
    if refused:
        assert f"“{key}”" in messages[0] and "refused" in messages[0] and "exponential" in messages[0]


# --- the compiled-book cache --------------------------------------------------------------------


def test_the_compiled_book_follows_a_changed_scan_depth_without_an_edit():
    specs = [E("a", keys=("smuggler",))]
    turns = [(1, "I look for the smuggler", "A hooded figure waits."), (2, "I walk", "Gulls circle.")]
    shallow = compiled_book(version="cache-test:1", specs=specs, defaults=LoreDefaults(scan_depth=2))
    deep = compiled_book(version="cache-test:1", specs=specs, defaults=LoreDefaults(scan_depth=6))
    assert deep.defaults.scan_depth == 6
    result = activate(book=deep, messages=scan_messages(pending_input="", turns=turns), turn=3, state=None, seed="s")
    assert result.activated_ids == ["a"]
    for name, value in (("recursion_depth", 0), ("token_budget", 50)):
        book = compiled_book(version="cache-test:1", specs=specs, defaults=LoreDefaults(**{name: value}))
        assert getattr(book.defaults, name) == value
    assert compiled_book(version="cache-test:1", specs=specs, defaults=LoreDefaults(scan_depth=2)) is shallow


# --- the delay explanation --------------------------------------------------------------------------


@pytest.mark.parametrize("turn, messages", [(1, 1), (2, 3)])
def test_a_delay_explanation_counts_the_messages_the_rule_counts(turn, messages):
    # The rule: the entry waits while the chat (with this turn's input) holds fewer than `delay` messages.
    turns = [(t, f"input {t}", f"narrative {t}") for t in range(1, turn)]
    result = evaluate([E("a", constant=True, delay=messages + 1)], "", turns=turns, turn=turn)
    reason = result.explanations["a"].reasons[0]
    assert result.activated_ids == [] and f"holds {messages} message(s) counting this turn's input" in reason
    assert evaluate([E("a", constant=True, delay=messages)], "", turns=turns, turn=turn).activated_ids == ["a"]


def test_a_key_is_parsed_compiled_and_judged_once_however_many_checks_ask(monkeypatch):
    # A save runs key_errors and key_hazards on every key, an import also asks which keys RE2
    # cannot run, and a rebuilt book compiles its unchanged keys again: one analysis per key.
    import uuid

    from studio.memory.lore_activation import regex_keys

    calls = []
    real_parse = regex_keys.parse
    monkeypatch.setattr(regex_keys, "parse", lambda *args: calls.append(args) or real_parse(*args))
    fresh = uuid.uuid4().hex  # a key no earlier test analysed
    key, slow = f"/dragon{fresh}s?/i", f"/(a+)+{fresh}/"
    for _ in range(3):
        assert regex_keys.key_errors([key, slow]) == []
        assert regex_keys.key_hazards([key]) == []
        assert len(regex_keys.key_hazards([slow])) == 1
        assert regex_keys.parse_regex_key(key)[0].engine == regex_keys.ENGINE_RE2
    assert len(calls) == 2

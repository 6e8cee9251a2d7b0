"""What runs a regex key in bounded time, and which keys are refused as catastrophic.

A key's pattern is parsed once by Python's own regex parser (`re._parser`), which fixes
what the pattern means. From that tree:

- `to_re2(tree)` writes the same pattern in RE2 syntax when every node has an exact
  RE2 equivalent (literals, classes of literals and ranges, `.`, groups, alternation,
  greedy and lazy repeats up to 1000, `^ $ \\A \\Z`, the i / m / s flags, also scoped).
  RE2 runs in time linear in the text, so such a key needs no limit. Nodes RE2 has no
  exact equivalent for send the key to the `regex` module with a time limit instead:
  back-references, look-around, atomic groups and possessive repeats (RE2 lacks them) and
  the classes `\\w \\d \\s \\b` (RE2's are ASCII-only, Python's and so the studio's are
  Unicode). Python's `$` also matches before a final line break; it is written
  `(?:\\n?\\z)` for RE2, which finds the same matches.
- `hazard(tree)` names the shape that makes a backtracking engine take exponential time:
  inside a repeated group, a variable part (a repeat, an optional part, alternatives) that
  can take the same characters as what may follow it, the next iteration included
  (`(a+)+`, `(\\w+\\s?)*`, `(a|aa)+`), or alternatives that can start alike. A text that
  almost matches can then be split between iterations in exponentially many ways. It is a
  structural check (like the `safe-regex` family of linters): it may refuse a pattern that
  would in fact run fast, never runs anything, and is only asked about keys RE2 cannot run.
"""

from __future__ import annotations

from re import _constants as C  # type: ignore[attr-defined]  # Python's own parser (3.11+)
from re import _parser as sre_parse  # type: ignore[attr-defined]

MAXREPEAT = C.MAXREPEAT
RE2_MAX_REPEAT = 1000
_FLAG_I, _FLAG_M, _FLAG_S = C.SRE_FLAG_IGNORECASE, C.SRE_FLAG_MULTILINE, C.SRE_FLAG_DOTALL
_UNSUPPORTED_FLAGS = C.SRE_FLAG_ASCII | C.SRE_FLAG_LOCALE
_REPEATS = (C.MAX_REPEAT, C.MIN_REPEAT)


class NotRE2(Exception):
    """The pattern uses something RE2 cannot run with the same meaning."""


def parse(pattern: str, flags: int):
    """Python's parse tree of `pattern` (raises re.error like re.compile)."""
    return sre_parse.parse(pattern, flags)


# --- RE2 translation ---------------------------------------------------------------------------


def _char(code: int) -> str:
    char = chr(code)
    if char.isascii() and char.isalnum():
        return char
    return f"\\x{{{code:x}}}"


def _class(items) -> str:
    negate, parts = False, []
    for op, av in items:
        if op is C.NEGATE:
            negate = True
        elif op is C.LITERAL:
            parts.append(_char(av))
        elif op is C.RANGE:
            parts.append(f"{_char(av[0])}-{_char(av[1])}")
        else:  # CATEGORY (\w \d \s ...): RE2's are ASCII-only
            raise NotRE2(op)
    if not parts:
        raise NotRE2("empty class")
    return ("[^" if negate else "[") + "".join(parts) + "]"


def _flag_group(add: int, delete: int) -> str:
    on = "".join(name for flag, name in ((_FLAG_I, "i"), (_FLAG_S, "s"), (_FLAG_M, "m")) if add & flag)
    off = "".join(name for flag, name in ((_FLAG_I, "i"), (_FLAG_S, "s"), (_FLAG_M, "m")) if delete & flag)
    return f"(?{on}-{off}:" if off else f"(?{on}:" if on else "(?:"


def _seq(items, flags: int) -> str:
    return "".join(_node(op, av, flags) for op, av in items)


def _node(op, av, flags: int) -> str:
    if op is C.LITERAL:
        return _char(av)
    if op is C.NOT_LITERAL:
        return f"[^{_char(av)}]"
    if op is C.ANY:
        return "(?s:.)" if flags & _FLAG_S else "[^\\n]"
    if op is C.IN:
        return _class(av)
    if op is C.BRANCH:
        return "(?:" + "|".join(_seq(branch, flags) for branch in av[1]) + ")"
    if op is C.SUBPATTERN:
        _group, add, delete, body = av
        if (add | delete) & _UNSUPPORTED_FLAGS:
            raise NotRE2("ascii / locale flag")
        inner = (flags | add) & ~delete
        return (
            _flag_group(add & (_FLAG_I | _FLAG_S | _FLAG_M), delete & (_FLAG_I | _FLAG_S | _FLAG_M))
            + _seq(body, inner)
            + ")"
        )
    if op in _REPEATS:
        low, high, body = av
        if low > RE2_MAX_REPEAT or (high != MAXREPEAT and high > RE2_MAX_REPEAT):
            raise NotRE2("repeat count over RE2's 1000")
        bounds = "{%d,}" % low if high == MAXREPEAT else "{%d}" % low if low == high else "{%d,%d}" % (low, high)
        return "(?:" + _seq(body, flags) + ")" + bounds + ("?" if op is C.MIN_REPEAT else "")
    if op is C.AT:
        if av is C.AT_BEGINNING:
            return "(?m:^)" if flags & _FLAG_M else "\\A"
        if av is C.AT_BEGINNING_STRING:
            return "\\A"
        if av is C.AT_END:  # Python's $ also matches before a final line break
            return "(?m:$)" if flags & _FLAG_M else "(?:\\n?\\z)"
        if av is C.AT_END_STRING:
            return "\\z"
        raise NotRE2(av)  # \b \B: RE2's word boundary is ASCII-only
    raise NotRE2(op)  # back-references, look-around, atomic groups, possessive repeats


def to_re2(tree) -> str:
    """The RE2 pattern meaning exactly what `tree` (a parse of a Python pattern) means; NotRE2 if none."""
    flags = tree.state.flags
    if flags & _UNSUPPORTED_FLAGS:
        raise NotRE2("ascii / locale flag")
    prefix = "(?i)" if flags & _FLAG_I else ""
    return prefix + _seq(tree, flags)


# --- catastrophic shapes -------------------------------------------------------------------------

_CATEGORY_TESTS = {
    C.CATEGORY_DIGIT: str.isdecimal,
    C.CATEGORY_NOT_DIGIT: lambda ch: not ch.isdecimal(),
    C.CATEGORY_SPACE: str.isspace,
    C.CATEGORY_NOT_SPACE: lambda ch: not ch.isspace(),
    C.CATEGORY_WORD: lambda ch: ch.isalnum() or ch == "_",
    C.CATEGORY_NOT_WORD: lambda ch: not (ch.isalnum() or ch == "_"),
}
_SAMPLES = "aZ0_ \n\t.-!é\u00a0٣"  # one character of each kind the categories tell apart


def _first_items(items) -> tuple[list, bool]:
    """The single-character nodes a sequence can start with, and whether it can match empty."""
    firsts: list = []
    for op, av in items:
        if op in (C.LITERAL, C.NOT_LITERAL, C.ANY, C.IN):
            return firsts + [(op, av)], False
        if op is C.AT or op in (C.ASSERT, C.ASSERT_NOT):
            continue
        if op is C.BRANCH:
            empty = False
            for branch in av[1]:
                found, can_be_empty = _first_items(branch)
                firsts += found
                empty = empty or can_be_empty
            if not empty:
                return firsts, False
            continue
        if op is C.SUBPATTERN or op is C.ATOMIC_GROUP:
            body = av[-1] if op is C.SUBPATTERN else av
            found, empty = _first_items(body)
            firsts += found
            if not empty:
                return firsts, False
            continue
        if op in _REPEATS or op is C.POSSESSIVE_REPEAT:
            found, empty = _first_items(av[2])
            firsts += found
            if av[0] > 0 and not empty:
                return firsts, False
            continue
        return firsts + [(C.ANY, None)], False  # a back-reference: anything
    return firsts, True


def _matcher(op, av):
    if op is C.LITERAL:
        return lambda ch: ch == chr(av)
    if op is C.NOT_LITERAL:
        return lambda ch: ch != chr(av)
    if op is C.ANY:
        return lambda ch: True
    tests, negate = [], False
    for item_op, item in av:
        if item_op is C.NEGATE:
            negate = True
        elif item_op is C.LITERAL:
            char = chr(item)
            tests.append(lambda ch, c=char: ch == c)
        elif item_op is C.RANGE:
            tests.append(lambda ch, lo=item[0], hi=item[1]: lo <= ord(ch) <= hi)
        elif item_op is C.CATEGORY and item in _CATEGORY_TESTS:
            tests.append(_CATEGORY_TESTS[item])
        else:
            tests.append(lambda ch: True)
    return (lambda ch: not any(t(ch) for t in tests)) if negate else (lambda ch: any(t(ch) for t in tests))


def _candidates(nodes) -> set[str]:
    chars = set(_SAMPLES)
    for op, av in nodes:
        if op in (C.LITERAL, C.NOT_LITERAL):
            chars.add(chr(av))
        elif op is C.IN:
            for item_op, item in av:
                if item_op is C.LITERAL:
                    chars.add(chr(item))
                elif item_op is C.RANGE:
                    chars.update((chr(item[0]), chr(item[1])))
    return chars


def _overlap(a: list, b: list, ignore_case: bool) -> bool:
    if not a or not b:
        return False
    chars = _candidates(a + b)
    if ignore_case:
        chars |= {c.swapcase() for c in chars if len(c.swapcase()) == 1}
    match_a = [_matcher(op, av) for op, av in a]
    match_b = [_matcher(op, av) for op, av in b]

    def fold(ch):
        return {ch, ch.lower(), ch.upper()} if ignore_case else {ch}

    for ch in chars:
        if any(m(x) for m in match_a for x in fold(ch)) and any(m(x) for m in match_b for x in fold(ch)):
            return True
    return False


_NESTED = (
    "a repeated group holds a repeat that can take the same characters as what follows it, as in "
    "(a+)+ or (\\w+\\s?)*, so a text that almost matches is tried in exponentially many ways"
)
_ALTERNATION = (
    "a repeated group holds alternatives or an optional part that can match the same text, as in "
    "(a|aa)+, so a text that almost matches is tried in exponentially many ways"
)


def _scan_body(items, follow: list, ignore_case: bool) -> str:
    """Inside a repeated body: a variable part whose first characters overlap what may follow it.

    `follow` is what may come after `items` (for the body itself: the start of the next
    iteration). Such a part lets one text be split between iterations in many ways.
    """
    for index, (op, av) in enumerate(items):
        rest, rest_empty = _first_items(items[index + 1 :])
        after = rest + (follow if rest_empty else [])
        if op is C.SUBPATTERN:
            found = _scan_body(av[3], after, ignore_case or bool(av[1] & _FLAG_I))
        elif op is C.BRANCH:
            firsts = [_first_items(branch) for branch in av[1]]
            starts = [node for found_nodes, _empty in firsts for node in found_nodes]
            if any(empty for _nodes, empty in firsts) and _overlap(starts, after, ignore_case):
                return _ALTERNATION
            if _branches_overlap(av[1], ignore_case):
                return _ALTERNATION
            found = next((f for f in (_scan_body(branch, after, ignore_case) for branch in av[1]) if f), "")
        elif op in _REPEATS:
            low, high, body = av
            body_first, _empty = _first_items(body)
            if low != high and _overlap(body_first, after, ignore_case):
                return _NESTED if high > 1 else _ALTERNATION
            found = _scan_body(body, body_first + after, ignore_case)
        else:
            found = ""
        if found:
            return found
    return ""


def _walk_hazard(items, ignore_case: bool) -> str:
    for op, av in items:
        if op in _REPEATS:
            low, high, body = av
            # A bound of 3 or more is scanned too: (a+){2,9}$ takes about n**9 steps on a text that
            # almost matches. Two iterations split a text at most n ways: at most quadratic.
            if high == MAXREPEAT or high >= 3:
                found = _scan_body(body, _first_items(body)[0], ignore_case)
                if found:
                    return found
            found = _walk_hazard(body, ignore_case)
        elif op is C.SUBPATTERN:
            found = _walk_hazard(av[3], ignore_case or bool(av[1] & _FLAG_I))
        elif op is C.BRANCH:
            found = next((f for f in (_walk_hazard(branch, ignore_case) for branch in av[1]) if f), "")
        elif op in (C.ASSERT, C.ASSERT_NOT):
            found = _walk_hazard(av[1], ignore_case)
        else:
            found = ""
        if found:
            return found
    return ""


def _branches_overlap(branches, ignore_case: bool) -> bool:
    firsts = [_first_items(branch)[0] for branch in branches]
    return any(
        _overlap(firsts[i], firsts[j], ignore_case) for i in range(len(firsts)) for j in range(i + 1, len(firsts))
    )


def hazard(tree) -> str:
    """Why a backtracking engine may take exponential time on this pattern, or "" if no known shape."""
    return _walk_hazard(list(tree), bool(tree.state.flags & _FLAG_I))

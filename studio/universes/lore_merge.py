"""Two versions of a lore entry side by side: a line diff and a merge the author can edit.

Used by the conflict view (an edit saved over a newer version; see `LoreEditConflict` in
services/lore.py). Pure functions over strings and snapshots; nothing here writes.

`merge_texts` keeps every line both versions share once; with no common ancestor to say
which side changed a block, every block where they differ is kept whole from both sides
between markers, theirs first, and the author deletes what they do not want. Nothing of
either text is dropped.
"""

from __future__ import annotations

import difflib
from typing import Any

THEIRS_MARK = "<<<<<<< theirs (saved)"
SPLIT_MARK = "======="
MINE_MARK = ">>>>>>> yours"


def diff_lines(theirs: str, mine: str) -> list[dict[str, str]]:
    """Return the line diff from theirs to mine: [{"tag": "same" | "theirs" | "mine", "text"}]."""
    a, b = theirs.splitlines(), mine.splitlines()
    rows: list[dict[str, str]] = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(a=a, b=b, autojunk=False).get_opcodes():
        if tag == "equal":
            rows.extend({"tag": "same", "text": line} for line in a[i1:i2])
            continue
        rows.extend({"tag": "theirs", "text": line} for line in a[i1:i2])
        rows.extend({"tag": "mine", "text": line} for line in b[j1:j2])
    return rows


def merge_texts(theirs: str, mine: str) -> str:
    """Return both texts merged: shared lines once, each differing block from both sides, marked."""
    if theirs == mine:
        return mine
    a, b = theirs.splitlines(), mine.splitlines()
    out: list[str] = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(a=a, b=b, autojunk=False).get_opcodes():
        if tag == "equal":
            out.extend(a[i1:i2])
        elif tag == "delete":
            out.extend([THEIRS_MARK, *a[i1:i2], SPLIT_MARK, MINE_MARK])
        elif tag == "insert":
            out.extend([THEIRS_MARK, SPLIT_MARK, *b[j1:j2], MINE_MARK])
        else:
            out.extend([THEIRS_MARK, *a[i1:i2], SPLIT_MARK, *b[j1:j2], MINE_MARK])
    return "\n".join(out)


def _shown(value: Any) -> str:
    if isinstance(value, (list, tuple)):
        return ", ".join(_shown(v) for v in value) or "—"
    if value is None or value == "":
        return "—"
    if isinstance(value, dict):
        return ", ".join(f"{k}: {_shown(v)}" for k, v in sorted(value.items())) or "—"
    return str(value)


def field_differences(theirs: dict[str, Any], mine: dict[str, Any]) -> list[dict[str, str]]:
    """Every field other than the text whose saved value differs from the edit's."""
    return [
        {"name": name, "theirs": _shown(theirs.get(name)), "mine": _shown(mine[name])}
        for name in mine
        if name != "text" and mine[name] != theirs.get(name)
    ]

"""Template filters for showing stored lore values to authors (not as Python reprs)."""

from __future__ import annotations

import json

from django import template

register = template.Library()


@register.filter
def revision_value(value) -> str:
    """Return a revision's field value as an author reads it.

    Keys and links are lists (`["Mira", "the moneylender"]`): shown joined with commas, as
    they are typed in the form. Extensions are objects: shown as indented JSON. None is blank.
    """
    if value is None:
        return ""
    if isinstance(value, (list, tuple)):
        return ", ".join(str(item) for item in value)
    if isinstance(value, dict):
        return json.dumps(value, ensure_ascii=False, indent=1, sort_keys=True) if value else ""
    return str(value)


@register.filter
def text_rows(text, width: int = 48) -> int:
    """Return how many rows a text area needs to show `text` whole (2 to 12).

    `width` is the characters a row holds at the table's usual width; browsers that size a
    text area to its content (CSS `field-sizing`) grow it exactly, this is the fallback.
    """
    lines = str(text or "").splitlines() or [""]
    rows = sum(max(1, -(-len(line) // int(width))) for line in lines)
    return max(2, min(12, rows))

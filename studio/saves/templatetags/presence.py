"""`{% presence_picker save turn_id %}`: who is present at a turn, and (for playtesters) a picker to set it.

One small include (`saves/_presence.html`) for the timeline, the turn page and the Console;
the form posts to the inspector's `memory:presence_edit`, which sets presence through
`studio.memory.knowledge.presence.presence_set` and re-carries it forward.
"""
from __future__ import annotations

from django import template

from studio.memory.knowledge.names import character_index, fold
from studio.memory.knowledge.presence import presence_at
from studio.roles import is_playtester

register = template.Library()


@register.inclusion_tag("saves/_presence.html", takes_context=True)
def presence_picker(context, game_save, turn_id):
    """Render turn `turn_id`'s presence (nothing for turn 0) with its picker."""
    request = context.get("request")
    turn_id = int(turn_id or 0)
    row = presence_at(game_save, turn_id) if turn_id else None
    present = list(row.characters) if row else []
    choices = character_index(game_save.universe, save=game_save).all_characters() if turn_id else []
    known = {fold(c) for c in choices}
    return {
        "save": game_save,
        "turn_id": turn_id,
        "row": row,
        "present": present,
        "choices": [(name, fold(name) in {fold(p) for p in present}) for name in choices],
        "others": ", ".join(p for p in present if fold(p) not in known),
        "can_edit": bool(request and is_playtester(request.user)),
    }

"""`{% presence_picker save turn_id %}`: who is present at a turn, and (for playtesters) a picker to set it.

One small include (`saves/_presence.html`) for the timeline, the turn page and the Console;
the form posts to the inspector's `memory:presence_edit`, which sets presence through
`studio.memory.knowledge.presence.presence_set` and re-carries it forward.

A page that shows many turns (the timeline) reads their presence rows once and passes them
as `presence_rows` ({turn: row}, `studio.memory.knowledge.presence.presence_by_turn`); the universe's
characters are read once per page render. Without `presence_rows` the tag reads its turn's
row itself.
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
    rows = context.get("presence_rows")
    if not turn_id:
        row = None
    else:
        row = rows.get(turn_id) if rows is not None else presence_at(game_save, turn_id)
    present = list(row.characters) if row else []
    choices = _characters(context, game_save) if turn_id else []
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


def _characters(context, game_save) -> list[str]:
    """The universe's characters, read once per page render however many pickers it shows."""
    cache = context.render_context
    key = ("presence_picker characters", game_save.pk)
    if key not in cache:
        cache[key] = character_index(game_save.universe, save=game_save).all_characters()
    return cache[key]

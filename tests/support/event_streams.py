"""Read the API's server-sent narration (`/narrate` with `stream`) and check that it wrote nothing."""

from __future__ import annotations

import json

from studio.saves.models import NarratorAlternative, NarratorDraft, NarratorSnapshot
from studio.world.models import Event


def parse_events(raw: str) -> list[tuple[str, dict]]:
    """Split an event stream into (event, data) pairs, as an EventSource would."""
    events = []
    for block in raw.split("\n\n"):
        if not block.strip():
            continue
        fields = dict(line.split(": ", 1) for line in block.split("\n"))
        events.append((fields["event"], json.loads(fields["data"])))
    return events


def nothing_written(game_save) -> bool:
    """True when the save still has the `game_save` fixture's three turns and no narrator row exists."""
    return (
        Event.objects.filter(game_save=game_save).count() == 3
        and not NarratorDraft.objects.exists()
        and not NarratorAlternative.objects.exists()
        and not NarratorSnapshot.objects.exists()
    )

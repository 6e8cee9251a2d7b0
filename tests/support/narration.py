"""Play a turn through the Console's narrator, as the page does: stream an alternative, accept it."""

from __future__ import annotations

from django.urls import reverse

from studio.saves.models import NarratorDraft
from studio.world.models import Event
from studio.saves.narrator import services


def stream_all(client, game_save, draft, number: int = 1) -> str:
    """Stream alternative `number` of `draft` through the Console's view; return the text it streamed."""
    response = client.post(reverse("saves:narrator_stream", args=[game_save.save_id, draft.pk, number]))
    assert response.status_code == 200 and response["Content-Type"].startswith("text/plain")
    return b"".join(response.streaming_content).decode()


def narrate_and_accept(client, game_save, action: str = "I wait") -> Event:
    """Narrate `action` as a new turn (a draft, its first alternative streamed) and accept it."""
    draft = services.narrator_draft_create(game_save=game_save, player_input=action)
    stream_all(client, game_save, draft, 1)
    return services.narrator_accept(draft=NarratorDraft.objects.get(pk=draft.pk))

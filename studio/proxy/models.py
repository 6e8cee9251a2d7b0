"""The memory proxy's own rows: what a retried request's first attempt left (`guard.py`).

Everything else a proxy request writes is the saves app's (turns, narrator drafts and their
alternatives), so rewind, fork and the Console treat it as their own.
"""

from __future__ import annotations

from django.db import models


class ProxyRequest(models.Model):
    """A request whose client may retry it: the save's mark its last write left, or that it lost a race.

    Kept for `guard.RETRY_MEMORY`; a retry is refused unless the save is still as this left it.
    Not per turn: a rewind keeps it (a retry after a rewind by someone else must still be refused).
    """

    game_save = models.ForeignKey("world.Save", on_delete=models.CASCADE, related_name="proxy_requests")
    key = models.CharField(max_length=64, help_text="sha256 of the Idempotency-Key, or of the body.")
    mark = models.CharField(max_length=80, help_text="The save's generation:turn:written-at after the last write.")
    lost = models.BooleanField(default=False, help_text="It lost a race: its retries are refused.")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["game_save", "key"], name="proxy_request_unique_key")]
        indexes = [models.Index(fields=["game_save", "created_at"])]

    def __str__(self) -> str:
        return f"proxy request {self.key[:12]} on {self.game_save_id}"


class ProxyChat(models.Model):
    """A save the proxy made for a chat under a universe's model name (`chats.py`): whose it is.

    The chats of a user under `axiom/u/<universe>/...` are matched against these saves only,
    so another player's saves (or the user's own saves made in the studio) are never bound
    to a chat by accident.
    """

    game_save = models.OneToOneField("world.Save", on_delete=models.CASCADE, related_name="proxy_chat")
    user = models.ForeignKey("auth.User", on_delete=models.CASCADE, related_name="proxy_chats")
    universe = models.ForeignKey("world.Universe", on_delete=models.CASCADE, related_name="proxy_chats")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        indexes = [models.Index(fields=["user", "universe", "-created_at"])]

    def __str__(self) -> str:
        return f"proxy chat {self.game_save_id} of {self.user_id}"

"""One proxy request's writes to a save, each checked under the save's lock: races answer 409.

A proxy request reads the save (its turns, its current turn), plans what brings it to the
chat (rewind, edits in place, appends, the proposal for the next answer) and then writes in
several transactions: a turn append finishes a failed rewind's vector delete outside any
transaction, so the whole sync cannot be one. Another request may write between two of them.

`SaveGuard` makes the plan one unit anyway. It reads the save's **mark** before the plan
(`SaveMark`: the timeline generation, the current turn and the time of the last write to
its turns; every turn write changes it: `turn_append`, `turn_update_narrative` and a rewind
set `updated_at`, a rewind bumps the generation), and every write runs in `guard.step()`: a
transaction that locks the save row (`select_for_update`; SQLite's IMMEDIATE transactions
serialise the same way), checks that the mark is still the one this request's last step
left, and raises `TurnConflict` (the save's current turn in it, nothing written by that
step) when another writer got in between. Of two requests planned against the same save
one goes through and the other is refused at its next step: a save never ends as a mix of
two chats.

**Retries.** A client that retries (the `openai` SDKs retry 408, 409, 429 and 5xx twice by
default, sending `X-Stainless-Retry-Count`; any client may send `Idempotency-Key`) must not
re-apply a chat that another request has replaced since its first attempt. Such a request
is keyed (`request_key`: its `Idempotency-Key`, else a digest of its body) and each attempt
records, under the save's lock, the mark its last write left (`ProxyRequest`), or that it
lost a race. A retry is refused with `OutdatedRetry` (a `TurnConflict`, 409) when its first
attempt lost, or when the save's mark is no longer the one its first attempt left: some
other request wrote since. Records older than `RETRY_MEMORY` are forgotten.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db import transaction
from django.utils import timezone

from studio.proxy.models import ProxyRequest
from studio.saves.errors import TurnConflict
from studio.world.models import Save
from studio.saves.services import PendingVectorCleanupError, finish_pending_vector_rollback

RETRY_MEMORY = timedelta(hours=1)  # the openai client's retries come within seconds; a day of keys is noise
IDEMPOTENCY_HEADER = "Idempotency-Key"
RETRY_COUNT_HEADER = "X-Stainless-Retry-Count"
VECTOR_DELETE_WAIT = 5.0  # seconds an append waits for another request's rewind to finish its vector delete


class OutdatedRetry(TurnConflict):
    """A retried request whose chat another request has replaced since its first attempt."""


@dataclass(frozen=True)
class SaveMark:
    """What a save's turns are at: any write to them (append, rewind, narrative edit) changes it."""

    generation: int
    turn: int
    written_at: datetime | None

    def __str__(self) -> str:
        return f"{self.generation}:{self.turn}:{self.written_at.isoformat() if self.written_at else ''}"


def mark_of(game_save: Save) -> SaveMark:
    return SaveMark(game_save.timeline_generation, game_save.current_turn, game_save.updated_at)


def save_mark(save_pk: int) -> SaveMark:
    """Return the save's mark as the database holds it now."""
    row = Save.objects.filter(pk=save_pk).values_list("timeline_generation", "current_turn", "updated_at").get()
    return SaveMark(*row)


@dataclass(frozen=True)
class RequestKey:
    """How a request that may be retried is recognised: its key, and what its client says of it."""

    key: str
    named: bool  # the client named the request (Idempotency-Key): every sight after the first is a retry
    retry: bool  # the client says this attempt is a retry (X-Stainless-Retry-Count above 0)


def request_key(*, headers, body: bytes) -> RequestKey | None:
    """Return the request's key when its client may retry it (None: a front end that never does).

    `Idempotency-Key` names the request; the `openai` SDKs send `X-Stainless-Retry-Count` (0 on
    the first attempt) and the same body on each attempt, so the body's digest names it.
    """
    idempotency = (headers.get(IDEMPOTENCY_HEADER) or "").strip()
    count = (headers.get(RETRY_COUNT_HEADER) or "").strip()
    if idempotency:
        return RequestKey(key=hashlib.sha256(f"key:{idempotency}".encode()).hexdigest(), named=True, retry=False)
    if count:
        return RequestKey(key=hashlib.sha256(b"body:" + body).hexdigest(), named=False, retry=count != "0")
    return None


def lost(*, game_save: Save, key: RequestKey) -> None:
    """Record that the request of `key` lost a race on the save: its retries are refused."""
    ProxyRequest.objects.filter(game_save_id=game_save.pk, key=key.key).update(lost=True)


def _conflict(locked: Save, message: str, kind=TurnConflict) -> TurnConflict:
    return kind(message, save_id=locked.save_id, current_turn=locked.current_turn)


class SaveGuard:
    """A request's writes to one save, each under the save's lock and checked against the last mark."""

    def __init__(self, game_save: Save, *, key: RequestKey | None = None):
        self.game_save = game_save
        self.key = key
        self.mark = save_mark(game_save.pk)
        self._sync_instance(self.mark)
        if key is not None:
            self._check_retry()

    def _sync_instance(self, mark: SaveMark) -> None:
        self.game_save.timeline_generation = mark.generation
        self.game_save.current_turn = mark.turn
        self.game_save.updated_at = mark.written_at

    def _check_retry(self) -> None:
        """Refuse a retry whose first attempt lost, or after which another request wrote; else record it."""
        with transaction.atomic():
            locked = Save.objects.select_for_update().get(pk=self.game_save.pk)
            ProxyRequest.objects.filter(game_save=locked, created_at__lt=timezone.now() - RETRY_MEMORY).delete()
            record = ProxyRequest.objects.filter(game_save=locked, key=self.key.key).first()
            now = mark_of(locked)
            if record is not None and (self.key.named or self.key.retry):
                if record.lost:
                    raise _conflict(
                        locked,
                        (
                            f"This request is a retry of one that lost a race on save {locked.save_id}: another "
                            f"request changed the save first (it is at turn {locked.current_turn}). Send the chat "
                            "again from the front end to play on from there."
                        ),
                        OutdatedRetry,
                    )
                if record.mark != str(now):
                    raise _conflict(
                        locked,
                        (
                            f"This request is a retry, and save {locked.save_id} has changed since its first attempt "
                            f"(it is at turn {locked.current_turn}): re-applying its chat would undo that change."
                        ),
                        OutdatedRetry,
                    )
            elif record is None:
                ProxyRequest.objects.create(game_save=locked, key=self.key.key, mark=str(now))
            else:  # a first attempt with the body of an earlier request (a swipe by a script): start afresh
                ProxyRequest.objects.filter(pk=record.pk).update(mark=str(now), lost=False, created_at=timezone.now())
        self.mark = now
        self._sync_instance(now)

    def finish_vector_deletes(self) -> None:
        """Finish a rewind's pending vector delete before an append (outside any transaction).

        Another request's rewind runs its delete right after its commit: when this request
        planned after that commit, it waits for the delete (up to `VECTOR_DELETE_WAIT`); when
        it planned before, that request wrote since and the answer is `TurnConflict`, as the
        next step would say, rather than a 503.
        """
        deadline = time.monotonic() + VECTOR_DELETE_WAIT
        while True:
            try:
                finish_pending_vector_rollback(game_save=self.game_save)
                return
            except PendingVectorCleanupError:
                if save_mark(self.game_save.pk) != self.mark:
                    locked = Save.objects.get(pk=self.game_save.pk)
                    raise _conflict(
                        locked,
                        (
                            f"Another request rewound save {locked.save_id} while this one was being handled (it is "
                            f"now at turn {locked.current_turn}); nothing more was written. Send the chat again."
                        ),
                    ) from None
                if time.monotonic() >= deadline:
                    raise
                time.sleep(0.05)

    @contextmanager
    def step(self) -> Iterator[Save]:
        """Run one write: lock the save, check the mark, yield the locked row, keep the new mark."""
        with transaction.atomic():
            locked = Save.objects.select_for_update().get(pk=self.game_save.pk)
            if mark_of(locked) != self.mark:
                raise _conflict(
                    locked,
                    (
                        f"Another request changed save {locked.save_id} while this one was being handled (it is now "
                        f"at turn {locked.current_turn}); nothing more was written. Send the chat again to play on."
                    ),
                )
            yield locked
            mark = save_mark(locked.pk)
            if self.key is not None and mark != self.mark:
                ProxyRequest.objects.filter(game_save=locked, key=self.key.key).update(mark=str(mark))
        self.mark = mark
        self._sync_instance(mark)

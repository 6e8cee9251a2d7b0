"""A save per chat: under `axiom/u/<universe>/<model>` each chat a user starts gets its own save.

No front end sends an id of the chat, so a chat is recognised by its history. `chat_save`
compares the chat (`history.Chat`: its greeting, its settled turns, the message asked for)
with the user's saves of that universe that the proxy made for chats (`ProxyChat`, newest
first, at most `MAX_CANDIDATES`), and returns the one it continues, or makes a new one:

- a save **continues** the chat when its opening is the chat's greeting (both or neither)
  and its turns are the chat's so far with the next input the one it waits on (its open
  draft: the answer the proxy relayed), or its first exchange has the chat's first user
  message and either the answer too, or a
  later turn at the same place, or (the chat's only exchange edited) the save waits on the
  chat's message (its open draft); a chat of the greeting and its first message alone
  continues only a save holding nothing more (its first answer swiped, or asked again);
- of several, the one sharing the most turns at the same places, then the newest;
- **none**: a new save of the universe (living memory: a model is connected, the proxy is
  using it), named after the chat's first message, whose turn 1 is the greeting (an input
  left empty, as the Console's opening from a card), bound to the user (`ProxyChat`).

The look-up and the creation hold the universe's row locked, so two first requests of one
chat (a quick swipe) make one save. A chat that starts like another (the same greeting and
first message) is taken for it until their histories part; the chat's own save is then
found by its turns.
"""

from __future__ import annotations

from django.db import transaction

from studio.proxy.history import Chat
from studio.proxy.models import ProxyChat
from studio.saves.models import DraftStatus, NarratorDraft
from studio.world.models import Event, MemoryMode, Save, Universe
from studio.saves.services import save_create, turn_append

MAX_CANDIDATES = 50
NAME_CHARS = 60


def opening_turns(chat: Chat) -> list[tuple[str, str]]:
    """The chat's turns as a save made for it holds them: the greeting first (an empty input), then its turns."""
    greeting = chat.greeting.strip()
    return ([("", greeting)] if greeting else []) + list(chat.turns)


def continuation_score(*, save_turns: list[tuple[str, str]], waiting_input: str | None, chat: Chat) -> int | None:
    """Return how many turns the save shares with the chat at the same places, or None when it is another chat."""
    turns = opening_turns(chat)
    first = 1 if chat.greeting.strip() else 0
    if save_turns[:first] != turns[:first]:
        return None
    waits = waiting_input is not None and waiting_input == (chat.pending_input or "").strip()
    if len(turns) == first:  # the greeting and the first message alone
        return first + 1 if save_turns == turns and (waiting_input is None or waits) else None
    if (
        len(save_turns) < len(turns)
        and turns[: len(save_turns)] == save_turns
        and waiting_input is not None
        and waiting_input == turns[len(save_turns)][0]
    ):
        return len(save_turns) + 1  # the chat carries on with the answer the save waits on
    if len(save_turns) <= first or save_turns[first][0] != turns[first][0]:
        return None
    same = [index for index in range(min(len(save_turns), len(turns))) if save_turns[index] == turns[index]]
    later = any(index > first for index in same)
    if save_turns[first][1] != turns[first][1] and not later and not (len(save_turns) == first + 1 and waits):
        return None
    return len(same) + int(waits)


def _candidates(user, universe: Universe) -> list[Save]:
    ids = list(
        ProxyChat.objects.filter(user=user, universe=universe)
        .order_by("-created_at", "-id")
        .values_list("game_save_id", flat=True)[:MAX_CANDIDATES]
    )
    return list(Save.objects.filter(pk__in=ids).order_by("-last_activity_at", "-id"))


def _history(game_save: Save) -> tuple[list[tuple[str, str]], str | None]:
    turns = [
        (i.strip(), n.strip())
        for i, n in Event.objects.filter(game_save=game_save)
        .order_by("turn_id")
        .values_list("player_input", "narrative")
    ]
    draft = (
        NarratorDraft.objects.filter(game_save=game_save, status=DraftStatus.OPEN, turn_id=game_save.current_turn + 1)
        .order_by("-id")
        .values_list("player_input", flat=True)
        .first()
    )
    return turns, draft.strip() if draft is not None else None


def chat_name(chat: Chat) -> str:
    """A new save's name: the chat's first message, on one line and short."""
    first = chat.turns[0][0] if chat.turns else (chat.pending_input or "")
    words = " ".join(first.split())
    return f"Chat: {words[:NAME_CHARS]}{'…' if len(words) > NAME_CHARS else ''}" if words else "Chat"


def chat_save(*, user, universe: Universe, chat: Chat) -> tuple[Save, bool]:
    """Return (the user's save this chat continues, or a new one for it; whether it was made now)."""
    with transaction.atomic():
        Universe.objects.select_for_update().only("pk").get(pk=universe.pk)  # one chat, one save
        best, best_score = None, -1
        for game_save in _candidates(user, universe):
            save_turns, waiting = _history(game_save)
            score = continuation_score(save_turns=save_turns, waiting_input=waiting, chat=chat)
            if score is not None and score > best_score:
                best, best_score = game_save, score
        if best is not None:
            return best, False
        game_save = save_create(universe=universe, name=chat_name(chat), memory_mode=MemoryMode.LIVING)
        ProxyChat.objects.create(game_save=game_save, user=user, universe=universe)
        if chat.greeting.strip():
            # A new save holds no rewind to finish: turn_append's vector check is a read here.
            turn_append(game_save=game_save, player_input="", narrative=chat.greeting.strip(), expected_turn_id=1)
    return game_save, True

"""Bring a save to the turn a front end's chat is on: edit, rewind what it dropped, append what is new.

`proxy_sync(game_save=, chat=)` compares the chat's settled turns (`history.Chat.turns`, each
a player input and the narration that answered it) with the save's Event_Log:

1. **Where the chat starts.** A front end sends only as much of a long chat as fits its
   context, so the chat's first turn is looked up among the save's turns: turn 1 if it
   matches, else the save's turns with the same input and narration (the one followed by
   the longest run of matching turns, the latest on a tie). A first turn that is turn 1
   edited (its input or its narration as turn 1's, or the chat's second turn as turn 2)
   starts at 1. A save with no turns starts at 1. A chat
   that matches nowhere in a save that has turns is refused (`HistoryMismatch`, nothing
   written): it is another chat, and binding it to this save would rewind it to nothing.
   When the save opens with the chat's greeting (turn 1: an empty input and the greeting, as
   a save the proxy made for a chat holds it), the greeting counts as the chat's turn 1.
2. **An edit costs one turn** (`sync_plan`). The longest common prefix from there is the last
   turn the chat and the save share, K. When the rest differs from the save only in the text
   of at most `MAX_IN_PLACE` turns at the same places (the player fixed a typo or edited an
   answer; messages deleted or added at the end besides), those turns are edited in place
   through `turn_update_narrative`, as the Console's edit: re-embedded and re-extracted, what
   the old text produced retired, nothing after them redone. Otherwise, when the save holds
   turns after K (a swipe of an older answer, messages removed or added in the middle,
   another branch of the chat), the save is rewound to K through `CheckpointManager.rewind`
   (one transaction: every registered per-turn table, facts, beliefs, mental models, lore
   activation, snapshots, the vector chunks after commit): exactly the state of a save
   played straight to the chat.
3. **The chat's turns after the save's are appended**, each through `turn_append` (the turn's memory
   jobs are queued as for any turn). The first of them is usually the answer the proxy
   relayed for the save's pending turn: when an open narrator draft holds that turn's input,
   it is accepted through `narrator_accept` with the narration as the chat has it (the
   alternative it matches, else the latest, marked edited), which writes the turn's
   narrator snapshot; an answer stopped by the front end is accepted the same way (the
   chat keeps the text it showed). An answer swiped away is an alternative never accepted:
   never written.

Appends are separate transactions (`turn_append` must finish a pending vector delete outside
one); a failure midway leaves the save at the last turn appended, and the next request
carries on from there. Every write is a step of the request's `guard.SaveGuard`: under the
save's lock it checks that nobody wrote since the request read the save (or since its own
last step), so of two requests racing on one save one goes through and the other gets
`TurnConflict` (409) at its next step, and the save is never a mix of the two chats.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field, replace

from django.db import connection, transaction

from studio.proxy.guard import SaveGuard
from studio.proxy.history import Chat
from studio.saves.checkpoints import CheckpointManager
from studio.saves.models import DraftStatus, NarratorAlternative, NarratorDraft
from studio.world.models import Event, Save
from studio.saves.narrator.guard import check_settled
from studio.saves.narrator.services import NarratorError, narrator_accept
from studio.saves.services import turn_append, turn_update_narrative

# How many earlier turns with the same input and narration as the chat's first are tried.
MAX_CANDIDATES = 20


class HistoryMismatch(Exception):
    """The chat is not this save's: its first turn matches none of the save's turns."""


@dataclass
class SyncResult:
    """What `proxy_sync` did to the save."""

    from_turn: int
    kept_turn: int  # K: the last turn the chat and the save shared
    start_turn: int  # the save turn the chat's first settled turn is
    rewound: bool = False
    appended: list[int] = field(default_factory=list)
    accepted_turn: int | None = None  # the turn whose narration was a relayed answer (snapshot written)
    edited: list[int] = field(default_factory=list)  # turns whose text was changed in place

    @property
    def changed(self) -> bool:
        return self.rewound or bool(self.appended) or bool(self.edited)


def _norm(text: str | None) -> str:
    return (text or "").strip()


def _rows(game_save: Save, first: int, last: int) -> dict[int, tuple[str, str]]:
    rows = Event.objects.filter(game_save=game_save, turn_id__gte=first, turn_id__lte=last).values_list(
        "turn_id", "player_input", "narrative"
    )
    return {turn: (_norm(i), _norm(n)) for turn, i, n in rows}


def _same_turns(game_save: Save, turn: tuple[str, str]) -> list[int]:
    """Return the latest `MAX_CANDIDATES` turns of the save with this input and narration, latest first.

    Looked up by the narration's digest (the `event_narrative_md5` index on (save, MD5 of the
    narrative)), so a long save's turns are not read one by one; the texts themselves are then
    compared here. Plain SQL: SQLite matches an index on an expression only when the query
    writes it as the index does (unqualified), its planner prefers the (save, turn) index for
    the ORDER BY unless told (`INDEXED BY`), and a `narrative = ?` beside `MD5(narrative) = ?`
    would let it fold the constant into the expression, which then matches no index (measured:
    ~430 ms at 100,000 turns instead of ~1 ms); PostgreSQL's planner takes the index by itself.
    """
    player_input, narrative = turn
    hint = " INDEXED BY event_narrative_md5" if connection.vendor == "sqlite" else ""
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT turn_id, narrative FROM {Event._meta.db_table}{hint} WHERE game_save_id = %s "
            "AND MD5(narrative) = %s AND player_input = %s ORDER BY turn_id DESC LIMIT %s",
            [game_save.pk, hashlib.md5(narrative.encode("utf-8")).hexdigest(), player_input, MAX_CANDIDATES],
        )
        return [turn_id for turn_id, text in cursor.fetchall() if text == narrative]


def _run(rows: dict[int, tuple[str, str]], start: int, turns: list[tuple[str, str]]) -> int:
    """Return how many of `turns` match the save's turns from `start` on."""
    count = 0
    for offset, turn in enumerate(turns):
        if rows.get(start + offset) != turn:
            break
        count += 1
    return count


def _new_chat_hint(game_save: Save) -> str:
    return (
        f"For a save per chat, use the model axiom/u/{game_save.universe.slug}/<model> (each new chat gets its "
        "own save); or start a new save, or rewind this one in the studio."
    )


def chat_start(*, game_save: Save, chat: Chat) -> tuple[int, int]:
    """Return (the save turn the chat's first settled turn is, how many turns match from there).

    Raise HistoryMismatch when the chat cannot be this save's (see the module docstring).
    """
    current = game_save.current_turn
    turns = chat.turns
    if current == 0:
        return 1, 0
    if not turns:
        # Nothing settled: the first message of a chat. It is this save's only if it is turn 1's
        # input (the player deleted back to the first message, or swiped its answer).
        first = _rows(game_save, 1, 1).get(1)
        if first is not None and chat.pending_input is not None and first[0] == _norm(chat.pending_input):
            return 1, 0
        raise HistoryMismatch(
            f"This chat has no turn in common with save {game_save.save_id} (at turn {current}): its first "
            f"message is not the save's first input. {_new_chat_hint(game_save)}"
        )
    window = len(turns)
    rows = _rows(game_save, 1, min(current, window))
    if rows.get(1) == turns[0]:
        return 1, _run(rows, 1, turns)
    candidates = _same_turns(game_save, turns[0])
    if not candidates:
        first = rows.get(1, ("", ""))
        if first[0] == turns[0][0] or first[1] == turns[0][1] or (len(turns) > 1 and rows.get(2) == turns[1]):
            return 1, 0  # turn 1 edited: its input, its narration, or both with turn 2 unchanged
        raise HistoryMismatch(
            f"This chat has no turn in common with save {game_save.save_id} (at turn {current}): its first turn "
            f"is none of the save's. {_new_chat_hint(game_save)}"
        )
    rows = _rows(game_save, min(candidates), min(current, max(candidates) + window - 1))
    best, best_run = candidates[0], -1
    for start in candidates:  # latest first: a tie keeps the latest
        run = _run(rows, start, turns)
        if run > best_run:
            best, best_run = start, run
    return best, best_run


def with_opening(game_save: Save, chat: Chat) -> Chat:
    """Return the chat with its greeting as turn 1 when the save opens with it (an empty input, the greeting:
    a save made for the chat, `chats.py`, or opened from the card in the Console), else the chat itself."""
    greeting = _norm(chat.greeting)
    if greeting and game_save.current_turn and _rows(game_save, 1, 1).get(1) == ("", greeting):
        return replace(chat, turns=[("", greeting), *chat.turns])
    return chat


def _open_draft(game_save: Save, turn_id: int, player_input: str) -> NarratorDraft | None:
    return (
        NarratorDraft.objects.filter(
            game_save=game_save, status=DraftStatus.OPEN, turn_id=turn_id, player_input=player_input
        )
        .order_by("-id")
        .first()
    )


def _accept(game_save: Save, draft: NarratorDraft, narrative: str) -> Event | None:
    """Accept the draft's alternative that became `narrative`; None when it has none with text.

    A stopped answer (the front end cancelled the stream, or it broke off, after some text)
    counts too, as in the Console: the chat keeps what was shown, so the turn gets the
    snapshot of the prompt and memory it was written from. The alternative whose text is the
    narration is chosen, else the latest complete one, else the latest stopped one. Run in a
    guard step: the save is locked, so no rewind can take the draft away meanwhile.
    """
    # Chosen by status and text: each alternative's prompt and memory context (a swipe's each) are not read here.
    alternatives = [
        a
        for a in draft.alternatives.order_by("-number").defer("context", "system_prompt", "user_prompt")
        if a.acceptable or a.stopped_with_text
    ]
    if not alternatives or not narrative:
        return None
    chosen = next((a for a in alternatives if _norm(a.text) == narrative), None) or next(
        (a for a in alternatives if a.acceptable), alternatives[0]
    )
    draft.game_save = game_save  # turn_append moves this instance's current turn
    try:
        with transaction.atomic():  # a refusal leaves the step's transaction usable for the plain append
            check_settled(draft=draft, number=chosen.number)  # the continuity guard, before the turn is appended
            event = narrator_accept(draft=draft, number=chosen.number, narrative=narrative)
    except NarratorError:
        return None  # closed meanwhile (the console accepted or discarded it): appended as is
    # The snapshot holds the prompt now (as a delta of the one before): the draft's copies of the whole
    # chat, one per alternative, would make the database grow with the square of the chat.
    NarratorAlternative.objects.filter(draft_id=draft.pk).update(system_prompt="", user_prompt="")
    return event


MAX_IN_PLACE = 2  # more turns differing than this is another branch of the chat: rewound, exactly


@dataclass(frozen=True)
class SyncPlan:
    """What brings the save to the chat: keep turns up to `keep`, edit `edits` in place, append the chat's rest."""

    keep: int  # the save turn to rewind to (the save's current turn: no rewind)
    edits: tuple[tuple[int, str, str], ...]  # (turn, player input, narrative) changed in place
    append_from: int  # the index in the chat's turns of the first one appended


def sync_plan(
    *, save_turns: list[tuple[str, str]], start: int, run: int, chat_turns: list[tuple[str, str]]
) -> SyncPlan:
    """Return the least work that brings the save's turns from `start` on (`save_turns`) to `chat_turns`.

    `run` is how many of them match from the start. When the rest differs only in the text
    of at most `MAX_IN_PLACE` turns at the same places (a typo fixed, an answer edited, a
    message deleted or added at the end besides), those turns are edited in place, as the
    Console's edit does: each re-embedded and re-extracted, nothing after it redone. A chat
    whose messages were added or removed in the middle (the rest shifted by them), or that
    differs in more turns (another branch), is rewound to the last shared turn and the rest
    appended: exactly the state a save played straight to it has.
    """
    held, asked = len(save_turns), len(chat_turns)
    overlap = min(held, asked)
    rewind_to_shared = SyncPlan(keep=start - 1 + run, edits=(), append_from=run)
    if run >= overlap:
        return SyncPlan(keep=start - 1 + overlap, edits=(), append_from=overlap)
    rest_held, rest_asked = save_turns[run:], chat_turns[run:]
    if asked > held and rest_asked[asked - held :] == rest_held:
        return rewind_to_shared  # turns added in the middle: the save's turns after them come again
    if asked < held and rest_held[held - asked :] == rest_asked:
        return rewind_to_shared  # turns removed in the middle
    edits = tuple(
        (start + index, *chat_turns[index]) for index in range(run, overlap) if chat_turns[index] != save_turns[index]
    )
    if len(edits) > MAX_IN_PLACE:
        return rewind_to_shared
    return SyncPlan(keep=start - 1 + overlap, edits=edits, append_from=overlap)


def proxy_sync(
    *, game_save: Save, chat: Chat, guard: SaveGuard | None = None, checkpoints: CheckpointManager | None = None
) -> SyncResult:
    """Rewind, edit in place and append so that the save's turns end as the chat's settled turns do.

    Raise `HistoryMismatch` (nothing written) for another chat's history and `TurnConflict`
    when another request wrote to the save meanwhile (the steps before it stay written).
    """
    guard = guard or SaveGuard(game_save)
    from_turn = game_save.current_turn
    chat = with_opening(game_save, chat)
    start, run = chat_start(game_save=game_save, chat=chat)
    held = _rows(game_save, start, from_turn) if from_turn >= start else {}
    plan = sync_plan(
        save_turns=[held[turn] for turn in range(start, from_turn + 1)], start=start, run=run, chat_turns=chat.turns
    )
    result = SyncResult(from_turn=from_turn, kept_turn=plan.keep, start_turn=start)
    if plan.keep < game_save.current_turn:
        with guard.step() as locked:
            (checkpoints or CheckpointManager()).rewind(locked, plan.keep)
        result.rewound = True
    for turn_id, player_input, narrative in plan.edits:
        with guard.step() as locked:
            turn_update_narrative(game_save=locked, turn_id=turn_id, narrative=narrative, player_input=player_input)
        result.edited.append(turn_id)
    for player_input, narrative in chat.turns[plan.append_from :]:
        # Outside the step's transaction, as turn_append requires (the vector store is not the database).
        guard.finish_vector_deletes()
        with guard.step() as locked:
            turn_id = locked.current_turn + 1
            event = None
            if not result.appended:  # only the save's next turn can have the relayed answer
                draft = _open_draft(locked, turn_id, player_input)
                if draft is not None:
                    event = _accept(locked, draft, narrative)
                    if event is not None:
                        result.accepted_turn = event.turn_id
            if event is None:
                event = turn_append(
                    game_save=locked, player_input=player_input, narrative=narrative, expected_turn_id=turn_id
                )
        result.appended.append(event.turn_id)
    return result

"""One proxy request: sync the save, add the memory context, relay, keep the answer as a proposal.

`proxy_prepare(game_save=, body=, ...)` does everything before the upstream call:

1. reads the chat (`history.read_chat`) and syncs the save to it (`sync.proxy_sync`);
2. builds the memory context for the pending input the way the studio's narrator does
   (`next_turn_context` with the narrator's token budget, the universe's `context_budget`
   unless the request asks for another (`axiom_memory_tokens`), and focus: lore activation,
   the memory layers, the explain record), leaving out of the recent turns those the chat
   itself carries (`ContextPolicy.carried_turns`, unless the universe sets `proxy_repeat_chat`):
   the model reads them once, in the chat. It places the renderer's text in the front end's
   messages (`history.inject`): at `{{axiom_memory}}` when the front end put one, else as the
   universe's `proxy_memory_placement` says (`placement_parts`; by default "split": the sections
   that stay the same from one request to the next after the system prompts, what changes
   with each request as a note after the chat's last message, so a model server's prefix
   cache keeps the front end's whole prompt up to its newest message);
3. when the answer will be a proposal for the next turn's narration
   (`Chat.records_answer`: not a continue or an impersonation), opens the save's narrator
   draft for that turn (the same input: the draft it already has, so a swipe is one more
   alternative of it) and a new alternative, "streaming", which will hold the prompt and the
   memory context as sent (`ProposalRecord`: written once the answer's first chunk is on its
   way, or when it ends, whichever comes first; its ~200 KB of explain record need not delay
   the first byte).

`proxy_relay(prepared, backend=, abort=)` sends the body through `TrackedLLM.relay` (the
save's spend guard and call log, operation "proxy") and returns the `Relay`; when the answer
ends the alternative is "done" with its text, model and usage, or "failed" / "cancelled". It
is written to the Event_Log only when a later request's chat carries it (`sync`). `abort` is
the view's watch on its client (`api.disconnect`): a front end that leaves before the answer
began makes it raise `LLMCancelled` with the alternative "cancelled", as the Console's Stop.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from studio.memory.llm import LLMCancelled, LLMError, Relay, TrackedLLM
from studio.memory.recall.context import next_turn_context
from studio.memory.recall.policy import context_policy
from studio.memory.recall.query_params import LIMITS, ContextParams, InvalidParameters
from studio.proxy.guard import RequestKey, SaveGuard, lost
from studio.proxy.history import Chat, content_text, inject, read_chat
from studio.proxy.sync import SyncResult, proxy_sync, with_opening
from studio.saves.errors import TurnConflict
from studio.saves.models import AlternativeStatus, DraftStatus, NarratorAlternative, NarratorDraft
from studio.world.models import Save, meta_read_once
from studio.saves.narrator.prompt import narrator_budget
from studio.saves.narrator.services import answer_values, narrator_alternative_add

OPERATION = "proxy"
MEMORY_HEADING = "## Memory"
NOTE_HEADING = "## Memory for this turn"
# Body fields the proxy reads and removes before relaying.
OWN_FIELDS = ("axiom_memory_tokens",)


@dataclass
class Prepared:
    """A request ready to relay: the upstream body and where its answer is recorded."""

    game_save: Save
    chat: Chat
    sync: SyncResult
    body: dict
    stream: bool
    placed: str  # where the memory went: marker, after_system, start, note, after_system+note, none
    memory: object | None  # the MemoryContext, or None when there was nothing to ask with
    alternative_id: int | None  # the proposal this answer fills (None: continue, impersonate)
    timings: dict[str, float] = field(default_factory=dict)  # ms: sync, memory, proposal
    meta: dict[str, str] | None = None  # the universe's meta the prompt read (the check at the answer's end reads it)
    record: ProposalRecord | None = None  # the proposal's prompt and memory, written once the answer began


class ProposalRecord:
    """What a proposal's alternative holds of its prompt (the messages as sent) and memory (the explain record),
    written once (`write`): after the answer's first chunk, or when it ends, or when the relay fails."""

    def __init__(self, *, alternative_id: int, messages: list, memory, proxy: dict):
        self.alternative_id = alternative_id
        self.messages, self.memory, self.proxy = messages, memory, proxy
        self.written = False

    def write(self, *_answer) -> None:
        if self.written:
            return
        self.written = True
        system_prompt, user_prompt = prompt_record(self.messages)
        context = self.memory.as_dict() if self.memory is not None else {}
        context["proxy"] = self.proxy
        NarratorAlternative.objects.filter(pk=self.alternative_id).update(
            system_prompt=system_prompt, user_prompt=user_prompt, context=context
        )


def memory_budget(value, *, universe_meta: dict[str, str]) -> int:
    """Return the memory context's token budget: `value` if a usable whole number, else the narrator's
    for the universe whose meta rows are `universe_meta` (its `context_budget`, else the built-in one)."""
    try:
        budget = int(value)
    except (TypeError, ValueError):
        return narrator_budget(universe_meta)
    return min(max(budget, LIMITS.token_budget_min), LIMITS.token_budget_max)


def placement_parts(memory, placement: str) -> tuple[str, str]:
    """Return (the block placed after the system prompts, the note placed after the chat) of the renderer's text.

    "split": the sections that stay the same from one request to the next, then what changes with each
    (`RenderedMemory.split`); "note": all of it after the chat; "system": all of it before the chat. Joined
    by a blank line (each without its heading) they are the renderer's text, byte for byte. ("", "") when
    the memory holds nothing: no item and nothing written after the budget.
    """
    if memory is None or not (memory.included or memory.section_texts):
        return "", ""
    rendered = memory.render()
    if placement == "split":
        stable, changing = rendered.split()
        return (f"{MEMORY_HEADING}\n{stable}" if stable else "", f"{NOTE_HEADING}\n{changing}" if changing else "")
    whole = f"{MEMORY_HEADING}\n{rendered.text}"
    return ("", whole) if placement == "note" else (whole, "")


def carried_turns(game_save: Save, chat: Chat, sync: SyncResult) -> frozenset[int]:
    """The save's turns the request's own messages carry: the chat's settled turns (its greeting too, when the
    save opens with it: `sync.with_opening`), from where it starts in the save."""
    return frozenset(range(sync.start_turn, sync.start_turn + len(with_opening(game_save, chat).turns)))


def _memory(game_save: Save, chat: Chat, budget: int, vector_memory, universe_meta: dict[str, str], carried):
    query = chat.pending_input if chat.pending_input is not None else (chat.turns[-1][0] if chat.turns else "")
    query = (query or "").replace("\x00", "")[: LIMITS.query_text_chars]
    try:
        params = ContextParams(query_text=query, token_budget=budget)
    except InvalidParameters:
        return None
    return next_turn_context(
        game_save=game_save,
        params=params,
        vector_memory=vector_memory,
        universe_meta=universe_meta,
        carried_turns=carried,
    )


def prompt_record(messages: list[dict]) -> tuple[str, str]:
    """Return (the system messages, the rest) of `messages` as text, as a narrator snapshot keeps a prompt."""
    system, chat = [], []
    for message in messages:
        text = content_text(message.get("content"))
        if message.get("role") in ("system", "developer"):
            system.append(text)
        else:
            name = f" ({message['name']})" if isinstance(message.get("name"), str) and message["name"] else ""
            chat.append(f"[{message.get('role')}{name}]\n{text}")
    return "\n\n".join(system), "\n\n".join(chat)


def proposal_open(*, game_save: Save, player_input: str, guard: SaveGuard | None = None) -> NarratorAlternative:
    """Add a "streaming" alternative to the save's open draft for its next turn with `player_input` (its prompt and
    memory come later: `ProposalRecord`).

    A draft for another input (or none) is replaced by a new one: older open drafts are
    discarded, as the console's narrator does when a new action is narrated. A step of the
    request's guard: `TurnConflict` when another request wrote to the save since it synced.
    """
    with (guard or SaveGuard(game_save)).step() as locked:
        turn_id = locked.current_turn + 1
        draft = (
            NarratorDraft.objects.filter(
                game_save=locked, status=DraftStatus.OPEN, turn_id=turn_id, player_input=player_input
            )
            .order_by("-id")
            .first()
        )
        if draft is None:
            NarratorDraft.objects.filter(game_save=locked, status=DraftStatus.OPEN).update(status=DraftStatus.DISCARDED)
            draft = NarratorDraft.objects.create(game_save=locked, turn_id=turn_id, player_input=player_input)
        alternative = narrator_alternative_add(draft=draft, status=AlternativeStatus.STREAMING)
    return alternative


def proposal_finish(*, alternative_id: int, relay: Relay | None, error: str = "", cancelled: bool = False) -> None:
    """Record how a relayed answer ended on its alternative (done, failed or cancelled).

    `cancelled` without a relay: the front end left before the answer began.
    """
    values: dict = {"error": error[:2000]}
    if relay is not None and relay.response is not None:
        values.update(answer_values(relay.response), text=relay.response.text)
        if relay.error is not None:
            values["error"] = f"The answer broke off: {relay.error}"[:2000]
    if cancelled and relay is None:
        values["status"] = AlternativeStatus.CANCELLED
    elif error or relay is None or relay.error is not None:
        values["status"] = AlternativeStatus.FAILED
    elif relay.cancelled:
        values["status"] = AlternativeStatus.CANCELLED
    else:
        values["status"] = AlternativeStatus.DONE
    NarratorAlternative.objects.filter(pk=alternative_id).update(**values)


def proxy_prepare(
    *,
    game_save: Save,
    body: dict,
    upstream_model: str,
    memory_tokens=None,
    vector_memory=None,
    key: RequestKey | None = None,
) -> Prepared:
    """Sync the save to the request's chat and build the upstream body (see the module docstring).

    Raise `history.InvalidMessages`, `sync.HistoryMismatch` or `TurnConflict` (nothing written
    by this request beyond the turns it synced; another request wrote to the save meanwhile,
    or `key` is a retry of an outdated attempt: `guard.OutdatedRetry`).
    """
    try:
        with meta_read_once():  # the lore activation, the guard, the macros and the context read it once
            return _prepare(
                game_save=game_save,
                body=body,
                upstream_model=upstream_model,
                memory_tokens=memory_tokens,
                vector_memory=vector_memory,
                key=key,
            )
    except TurnConflict:
        if key is not None:
            lost(game_save=game_save, key=key)
        raise


def _prepare(
    *, game_save: Save, body: dict, upstream_model: str, memory_tokens, vector_memory, key: RequestKey | None
) -> Prepared:
    clock = time.perf_counter()
    timings = {}

    def lap(name: str) -> None:
        nonlocal clock
        now = time.perf_counter()
        timings[name] = round((now - clock) * 1000, 1)
        clock = now

    chat = read_chat(body.get("messages"))
    guard = SaveGuard(game_save, key=key)
    sync = proxy_sync(game_save=game_save, chat=chat, guard=guard)
    lap("sync")
    universe_meta = game_save.universe.meta_values()  # read once: the budget, the placement and the context
    policy = context_policy(universe_meta)
    budget = memory_budget(
        memory_tokens if memory_tokens is not None else body.get("axiom_memory_tokens"), universe_meta=universe_meta
    )
    carried = frozenset() if policy.proxy_repeat_chat else carried_turns(game_save, chat, sync)
    memory = _memory(game_save, chat, budget, vector_memory, universe_meta, carried)
    lap("memory")
    block, note = placement_parts(memory, policy.proxy_placement)
    messages, placed = inject(body["messages"], block, note=note)
    upstream = {key: value for key, value in body.items() if key not in OWN_FIELDS}
    upstream["model"] = upstream_model
    upstream["messages"] = messages
    alternative_id = record = None
    if chat.records_answer:
        alternative = proposal_open(game_save=game_save, player_input=chat.pending_input, guard=guard)
        alternative_id = alternative.pk
        record = ProposalRecord(
            alternative_id=alternative_id,
            messages=messages,
            memory=memory,
            proxy={"placed": placed, "upstream_model": upstream_model, "stream": bool(body.get("stream"))},
        )
    lap("proposal")
    return Prepared(
        game_save=game_save,
        chat=chat,
        sync=sync,
        body=upstream,
        stream=bool(body.get("stream")),
        placed=placed,
        memory=memory,
        alternative_id=alternative_id,
        timings=timings,
        meta=universe_meta,
        record=record,
    )


def proxy_relay(
    prepared: Prepared,
    *,
    backend,
    abort=None,
    user_id: int | None = None,
    check_now: bool = False,
    preflighted: bool = False,
) -> Relay:
    """Relay the prepared body (guarded and logged); record the answer on its alternative when it ends, and check it
    then with the continuity guard, its findings recorded with the proposal (deterministic checks; `check_now`: the
    model confirms possible contradictions too). `preflighted`: the request checked the save's and the user's spend
    guards before it wrote anything (`TrackedLLM.preflight`): the relay does not check them again.

    Raise what `TrackedLLM.relay` raises (the alternative is then marked failed, or
    cancelled for `LLMCancelled`: `abort` flipped before the answer began).
    """
    tracked = TrackedLLM(backend, game_save_id=prepared.game_save.pk, user_id=user_id)  # the key's user's daily guard
    record = prepared.record
    try:
        relay = tracked.relay(
            prepared.body, stream=prepared.stream, operation=OPERATION, abort=abort, preflighted=preflighted
        )
    except BaseException as exc:
        if record is not None:
            record.write()  # the proposal keeps what it asked with, whatever became of it
        if prepared.alternative_id is not None and isinstance(exc, LLMCancelled):
            proposal_finish(
                alternative_id=prepared.alternative_id,
                relay=None,
                cancelled=True,
                error="Stopped: the front end left before the answer began.",
            )
        elif prepared.alternative_id is not None and isinstance(exc, LLMError):
            proposal_finish(alternative_id=prepared.alternative_id, relay=None, error=str(exc))
        raise
    if record is not None:
        # The prompt and the memory are written once the first chunk is on its way (or when the answer ends first).
        relay.on_first.append(record.write)
        relay.on_finish.append(record.write)
    if prepared.alternative_id is not None:
        alternative_id = prepared.alternative_id
        relay.on_finish.append(lambda done: proposal_finish(alternative_id=alternative_id, relay=done))
        # Checked when it ends, after its last byte: the chat's next message, which settles it, need not wait for
        # the check (`check_settled` then finds the text checked). Deterministic unless the front end asked.
        meta = prepared.meta
        relay.on_finish.append(
            lambda done: proposal_check(alternative_id=alternative_id, use_model=check_now, meta=meta)
        )
    return relay


def proposal_check(*, alternative_id: int, use_model: bool = True, meta: dict[str, str] | None = None) -> None:
    """Check a relayed answer that ended complete; `use_model`: the model confirms possible contradictions (the
    front end asked: `X-Axiom-Continuity: check`); `meta`: the universe's meta its prompt read (else read now)."""
    from studio.saves.narrator.guard import check_alternative

    alternative = (
        NarratorAlternative.objects.select_related("draft__game_save")
        .defer("context", "system_prompt", "user_prompt")
        .filter(pk=alternative_id)
        .first()
    )
    if alternative is not None and alternative.status == AlternativeStatus.DONE:
        check_alternative(alternative=alternative, use_model=use_model, meta=meta)  # the proxy never narrates again


def proposal_findings(*, alternative_id: int) -> str:
    """The `X-Axiom-Continuity` answer header: the findings of a checked answer by kind ("leak=1, presence=0, ...")."""
    from studio.memory.continuity.models import ContinuityFinding, FindingKind

    alternative = NarratorAlternative.objects.select_related("draft").filter(pk=alternative_id).first()
    if alternative is None:
        return ""
    rows = ContinuityFinding.objects.filter(
        draft_id=alternative.draft_id, alternative=alternative.number, game_save_id=alternative.draft.game_save_id
    ).exclude(verdict="rejected")
    kinds = list(rows.values_list("kind", flat=True))
    return ", ".join(f"{kind}={kinds.count(kind)}" for kind in FindingKind.values)

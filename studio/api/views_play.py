"""The Console's play controls over the API: the card's opening, Continue, Impersonate, Undo /
Retry of the last turn, the save's play settings (author's note, sampler).

As `narrate`, the model's proposals (continue, impersonate, retry) append nothing: the engine
appends the text it keeps with `POST .../turns`. Undo and Retry are a rewind by one with the
expected current turn (409 when the save moved on); Retry then asks the narrator again for the
undone turn's action (the undo stays if that call fails: the error says so). Services:
`studio/saves/narrator/play.py` and `play_settings.py`; docs/api.md, "Play controls".
"""

from __future__ import annotations

from typing import Literal, Optional

from django.http import HttpRequest, JsonResponse
from ninja import Schema
from pydantic import Field

from studio import limits
from studio.api import schemas as S
from studio.api.schemas_narration import Narration
from studio.api import serializers
from studio.api.errors import ApiError, conflict, validation_error
from studio.api.limited import limited
from studio.api.ninja_api import router
from studio.api.views_narrate import _llm_error, narration_json
from studio.saves.access import Access, save_for

SAVE = "/saves/{str:save_id}"
READ_ERRORS = {400: S.Error, 401: S.Error, 404: S.Error, 503: S.Error}
WRITE_ERRORS = {**READ_ERRORS, 403: S.Error, 409: S.Error, 413: S.Error, 415: S.Error}
MODEL_ERRORS = {429: S.Error, 502: S.Error}


# -- schemas -------------------------------------------------------------------------------------


class Greeting(Schema):
    number: int
    text: str


class Opening(Schema):
    save_id: str
    available: bool = Field(..., description="True while the save is at turn 0 and its universe has a card greeting.")
    greetings: list[Greeting] = Field(..., description="The card's first message (1), then its alternate greetings.")


class OpeningRequest(Schema):
    number: S.Int = Field(1, ge=1, description="Which greeting becomes turn 1 (1 = the card's first message).")


class ContinueRequest(Schema):
    # A turn's narrative, so a turn's limit (studio/limits.py): what a turn holds can be continued.
    narrative: Optional[
        limited("turn.narrative", description="The narration to extend (default: the last turn's).")
    ] = None


class Continuation(Schema):
    save_id: str
    turn_id: int = Field(..., description="The turn whose narration is extended.")
    addition: str = Field(..., description="What the model added.")
    narrative: str = Field(..., description="The narration with the addition.")
    appended: Literal[False]
    model: str
    finish_reason: Optional[str] = None
    truncated: bool = False
    latency_ms: Optional[int] = None
    prompt_tokens: Optional[int] = None
    completion_tokens: Optional[int] = None


class ImpersonateRequest(Schema):
    mode: Literal["do", "say", "story"] = Field("do", description="What to write: an action, words, a story line.")


class Impersonation(Schema):
    save_id: str
    action: str = Field(..., description="The player's next action as the model wrote it; nothing is appended.")
    model: str
    latency_ms: int


class LastTurnRequest(Schema):
    expected_current_turn: S.Int = Field(
        ..., ge=1, description="The save's current turn as the client last saw it (409 otherwise)."
    )


class Undone(Schema):
    save_id: str
    undone_turn: int
    player_input: str = Field(..., description="The undone turn's action (to retry or edit).")
    save: S.Save


class Retried(Schema):
    undone_turn: int
    narration: Narration


class DraftAlternative(Schema):
    number: int
    status: Literal["pending", "streaming", "done", "failed", "cancelled"]
    text: str = Field(..., description="The proposed narration (so far, while streaming; as shown, when stopped).")
    model: str = ""
    finish_reason: str = ""
    chosen: bool


class PendingDraft(Schema):
    save_id: str
    current_turn: int
    draft: Optional[dict] = Field(
        ...,
        description="The open draft for the next turn, or null: {turn_id, player_input, "
        "created_at, alternatives: [DraftAlternative]}. The memory proxy's last answer waits "
        "here until the chat's next message settles it (docs/proxy.md).",
    )


class SamplerValue(Schema):
    value: Optional[float] = None
    source: str = Field(..., description="save, universe, environment or server default.")


class PlaySettings(Schema):
    save_id: str
    authors_note: str
    authors_note_depth: int
    overrides: dict[str, Optional[float]] = Field(..., description="This save's own sampler values (null: not set).")
    effective: dict[str, SamplerValue] = Field(..., description="What the next narration is sent, and from where.")
    problems: list[str] = Field(default_factory=list, description="Universe sampler_* meta values that were ignored.")


class PlaySettingsPatch(Schema):
    authors_note: Optional[limited("play.authors_note")] = None
    authors_note_depth: Optional[limited("play.authors_note_depth")] = None
    temperature: limited("play.temperature", description="0 to 2; null clears the save's value.") = None
    top_p: limited("play.top_p", description="0 to 1; null clears.") = None
    max_tokens: limited("play.max_tokens", description="1 to 32768; null clears.") = None
    frequency_penalty: limited("play.frequency_penalty", description="-2 to 2; null clears.") = None
    repeat_penalty: limited("play.repeat_penalty", description="0 to 3; null clears.") = None


def _json(body: dict, status: int = 200) -> JsonResponse:
    return JsonResponse(body, status=status, encoder=serializers.ApiJSONEncoder)


def _no_model():
    from studio.saves.narrator.selectors import llm_connected
    from studio.saves.narrator.services import NO_MODEL

    if not llm_connected():
        raise ApiError(503, "no_model", NO_MODEL)


# -- the opening ---------------------------------------------------------------------------------


@router.get(
    SAVE + "/opening",
    response={200: Opening, **READ_ERRORS},
    url_name="opening",
    tags=["Narrator"],
    operation_id="getOpening",
    summary="The card's greetings the save can open with (turn 1).",
)
def opening(request: HttpRequest, save_id: str):
    from studio.saves.narrator.opening import opening_greetings

    save = save_for(user=request.user, save_id=save_id)
    greetings = opening_greetings(game_save=save)
    return _json(
        {
            "save_id": save.save_id,
            "available": bool(greetings) and save.current_turn == 0,
            "greetings": [{"number": n, "text": t} for n, t in enumerate(greetings, start=1)],
        }
    )


@router.post(
    SAVE + "/opening",
    response={201: S.TurnAppended, **WRITE_ERRORS},
    url_name="opening",
    tags=["Narrator"],
    operation_id="appendOpening",
    summary="Append the card's greeting `number` as turn 1 (no model call).",
)
def opening_append(request: HttpRequest, save_id: str, payload: OpeningRequest):
    from studio.saves.errors import TurnConflict
    from studio.saves.narrator.opening import NoSuchGreeting, opening_accept
    from studio.saves.narrator.play import PlayError

    save = save_for(user=request.user, save_id=save_id, access=Access.PLAY)
    try:  # the service's check is the only one: 400 for a greeting the card lacks, 409 for the save's state
        event = opening_accept(game_save=save, number=payload.number)
    except TurnConflict as exc:
        raise conflict(exc.message, {"current_turn": exc.current_turn}) from exc
    except NoSuchGreeting as exc:
        raise validation_error({"number": [str(exc)]}) from exc
    except PlayError as exc:
        raise conflict(str(exc), {"current_turn": save.current_turn}) from exc
    save.refresh_from_db()
    return _json({"turn": serializers.event_json(event, {}), "save": serializers.save_json(save)}, status=201)


# -- continue, impersonate -----------------------------------------------------------------------


@router.post(
    SAVE + "/continue",
    response={200: Continuation, **WRITE_ERRORS, **MODEL_ERRORS},
    url_name="continue",
    tags=["Narrator"],
    operation_id="continueNarration",
    summary="The model's continuation of a narration (default: the last turn's); appends nothing.",
)
def continue_narration(request: HttpRequest, save_id: str, payload: ContinueRequest):
    from studio.memory.llm import LLMError
    from studio.saves.narrator.play import PlayError, continue_once

    save = save_for(user=request.user, save_id=save_id, access=Access.PLAY)
    _no_model()
    try:
        result = continue_once(game_save=save, narrative=payload.narrative)
    except PlayError as exc:
        raise validation_error({"narrative": [str(exc)]}) from exc
    except limits.Refused as exc:
        raise validation_error({"narrative": [exc.message]}) from exc
    except LLMError as exc:
        raise _llm_error(exc) from exc
    response = result.response
    return _json(
        {
            "save_id": save.save_id,
            "turn_id": save.current_turn,
            "addition": result.addition,
            "narrative": result.narrative,
            "appended": False,
            "model": response.model,
            "finish_reason": response.finish_reason,
            "truncated": response.truncated,
            "latency_ms": response.latency_ms,
            "prompt_tokens": response.prompt_tokens,
            "completion_tokens": response.completion_tokens,
        }
    )


@router.post(
    SAVE + "/impersonate",
    response={200: Impersonation, **WRITE_ERRORS, **MODEL_ERRORS},
    url_name="impersonate",
    tags=["Narrator"],
    operation_id="impersonate",
    summary="The player's next action, written by the model; appends nothing.",
)
def impersonate(request: HttpRequest, save_id: str, payload: ImpersonateRequest):
    from studio.memory.llm import LLMError
    from studio.saves.narrator.impersonate import impersonate as write_action

    save = save_for(user=request.user, save_id=save_id, access=Access.PLAY)
    _no_model()
    try:
        result = write_action(game_save=save, mode=payload.mode)
    except LLMError as exc:
        raise _llm_error(exc) from exc
    return _json(
        {"save_id": save.save_id, "action": result.text, "model": result.model, "latency_ms": result.latency_ms}
    )


# -- undo, retry ---------------------------------------------------------------------------------


def _undo(save, expected: int):
    from studio.saves.errors import TurnConflict
    from studio.saves.narrator.play import PlayError, last_turn_undo

    try:
        return last_turn_undo(game_save=save, expected_turn=expected)
    except TurnConflict as exc:
        raise conflict(exc.message, {"current_turn": exc.current_turn}) from exc
    except PlayError as exc:
        raise conflict(str(exc), {"current_turn": save.current_turn}) from exc


@router.post(
    SAVE + "/undo",
    response={200: Undone, **WRITE_ERRORS},
    url_name="undo",
    tags=["Narrator"],
    operation_id="undoLastTurn",
    summary="Undo the last turn: a rewind by one (409 if the save moved on).",
)
def undo(request: HttpRequest, save_id: str, payload: LastTurnRequest):
    save = save_for(user=request.user, save_id=save_id, access=Access.PLAY)
    player_input, _result = _undo(save, payload.expected_current_turn)
    return _json(
        {
            "save_id": save.save_id,
            "undone_turn": payload.expected_current_turn,
            "player_input": player_input,
            "save": serializers.save_json(save),
        }
    )


@router.post(
    SAVE + "/retry",
    response={200: Retried, **WRITE_ERRORS, **MODEL_ERRORS},
    url_name="retry",
    tags=["Narrator"],
    operation_id="retryLastTurn",
    summary="Undo the last turn and ask the narrator again for its action; appends nothing.",
)
def retry(request: HttpRequest, save_id: str, payload: LastTurnRequest):
    from studio.memory.llm import LLMError
    from studio.saves.narrator.services import narrate_once

    save = save_for(user=request.user, save_id=save_id, access=Access.PLAY)
    _no_model()
    player_input, _result = _undo(save, payload.expected_current_turn)
    try:
        narration = narrate_once(game_save=save, player_input=player_input)
    except LLMError as exc:
        error = _llm_error(exc)
        raise ApiError(
            error.status,
            error.code,
            f"{error.message} (turn {payload.expected_current_turn} was undone)",
            {"undone_turn": payload.expected_current_turn, "player_input": player_input},
        ) from exc
    return _json(
        {
            "undone_turn": payload.expected_current_turn,
            "narration": narration_json(save, player_input, narration.text, narration.response, narration.prompt),
        }
    )


# -- play settings -------------------------------------------------------------------------------


@router.get(
    SAVE + "/play-settings",
    response={200: PlaySettings, **READ_ERRORS},
    url_name="play_settings",
    tags=["Narrator"],
    operation_id="getPlaySettings",
    summary="The save's author's note and sampler settings, and what the next narration is sent.",
)
def play_settings(request: HttpRequest, save_id: str):
    from studio.saves.narrator.play_settings import play_settings_read

    save = save_for(user=request.user, save_id=save_id)
    return _json({"save_id": save.save_id, **play_settings_read(game_save=save)})


@router.patch(
    SAVE + "/play-settings",
    response={200: PlaySettings, **WRITE_ERRORS},
    url_name="play_settings",
    tags=["Narrator"],
    operation_id="updatePlaySettings",
    summary="Change the fields given (null clears a sampler override); nothing changes on an error.",
)
def play_settings_update(request: HttpRequest, save_id: str, payload: PlaySettingsPatch):
    from studio.saves.narrator.play_settings import play_settings_update as update

    save = save_for(user=request.user, save_id=save_id, access=Access.PLAY)
    changes = payload.model_dump(exclude_unset=True)
    try:
        state = update(game_save=save, changes=changes)
    except ValueError as exc:
        field, _, message = str(exc).partition(": ")
        raise validation_error({field: [message or str(exc)]}) from exc
    return _json({"save_id": save.save_id, **state})


# -- the pending exchange -------------------------------------------------------------------------


@router.get(
    SAVE + "/draft",
    response={200: PendingDraft, **READ_ERRORS},
    url_name="draft",
    tags=["Narrator"],
    operation_id="getDraft",
    summary="The narration proposed for the next turn and not yet accepted (the Console's draft, the memory "
    "proxy's last answer), or null.",
)
def pending_draft(request: HttpRequest, save_id: str):
    from studio.saves.narrator.services import open_draft

    save = save_for(user=request.user, save_id=save_id)
    draft = open_draft(game_save=save)
    body = None
    if draft is not None:
        body = {
            "turn_id": draft.turn_id,
            "player_input": draft.player_input,
            "created_at": draft.created_at,
            "alternatives": [
                {
                    "number": a.number,
                    "status": a.status,
                    "text": a.text,
                    "model": a.model,
                    "finish_reason": a.finish_reason,
                    "chosen": a.number == draft.chosen_number,
                }
                for a in draft.alternatives.all()
            ],
        }
    return _json({"save_id": save.save_id, "current_turn": save.current_turn, "draft": body})

"""POST /saves/{save_id}/narrate: the narrator's proposal for the next turn, whole or streamed.

Nothing is ever appended: the engine appends the text it keeps with `POST .../turns`. Asked
with `"stream": true` or `Accept: text/event-stream`, the answer is server-sent events
(docs/api.md, "Streaming narration"):

    event: start   data: {"save_id", "turn_id", "player_input", "model"}
    event: delta   data: {"text": "..."}            (once per piece of text from the model)
    event: done    data: the same object the non-streaming answer is
    event: error   data: {"error": {"code", "message", "details"}}   (the model broke off)

Failures before the first byte (no model 503, spend limit 429, the model unreachable 502,
validation 400, access 404 / 403) are ordinary JSON errors with their status. A model that
breaks off mid-stream ends the stream with an `error` event; a client that disconnects
closes the model's stream (Django closes the body). Either way no turn, draft or
snapshot is written, as in the console; the call log (LLMCall) records how the call ended.

A client that leaves before anything is written to it (the front end's Stop while a local
model reads the prompt) is noticed where the server hands over its socket (gunicorn:
`disconnect.client_watch`): the watch ends the model's request at once, from its opening to
the body's end, as the Console's Stop does. Before the answer began the call is logged
"stopped before the answer began" (and the view answers 499, which nobody reads); after it,
the stream ends with no `done` event and the call is logged "cancelled by the reader".
Without a socket to watch (runserver) nothing changes.
"""

from __future__ import annotations

import json

from django.http import HttpRequest, StreamingHttpResponse

from studio.api import schemas as S
from studio.api.schemas_narration import Narration
from studio.api import serializers
from studio.api.disconnect import ClosingBody, client_left, client_watch
from studio.api.errors import ApiError
from studio.api.ninja_api import router
from studio.saves.access import Access, save_for

STREAM_MEDIA_TYPE = "text/event-stream"


def _llm_error(exc) -> ApiError:
    from studio.memory.llm import SpendLimitExceeded

    if isinstance(exc, SpendLimitExceeded):
        return ApiError(
            429,
            "spend_limit",
            exc.reason,
            {"resume_at": exc.resume_at.isoformat()},
            headers={"Retry-After": exc.retry_after()},
        )
    return ApiError(502, "llm_failed", f"The narrator's model failed: {exc}")


def narration_json(save, player_input: str, text: str, response, prompt, continuity: dict | None = None) -> dict:
    return {
        "save_id": save.save_id,
        "turn_id": prompt.turn_id,
        "player_input": player_input,
        "narrative": text,
        "appended": False,
        "model": response.model,
        "finish_reason": response.finish_reason,
        "truncated": response.truncated,
        "latency_ms": response.latency_ms,
        "prompt_tokens": response.prompt_tokens,
        "completion_tokens": response.completion_tokens,
        "prompt": {"system": prompt.system, "user": prompt.user, "chars": prompt.chars},
        "context": prompt.context_record(),
        "continuity": continuity,
    }


def sse_event(event: str, data: dict) -> bytes:
    """One server-sent event; the JSON is on one line, so one `data:` field carries it."""
    text = json.dumps(data, cls=serializers.ApiJSONEncoder, ensure_ascii=False)
    return f"event: {event}\ndata: {text}\n\n".encode()


def _narrate_pov(payload: S.NarrateRequest):
    """`pov`, else `present` (who is on scene for this turn), else None: those on scene (docs/knowledge.md)."""
    return S.pov_names(payload.pov if payload.pov is not None else payload.present)


def wants_stream(request: HttpRequest, payload: S.NarrateRequest) -> bool:
    return payload.stream or STREAM_MEDIA_TYPE in request.headers.get("Accept", "")


@router.post(
    "/saves/{str:save_id}/narrate",
    response={
        200: Narration,
        400: S.Error,
        401: S.Error,
        403: S.Error,
        404: S.Error,
        413: S.Error,
        415: S.Error,
        429: S.Error,
        502: S.Error,
        503: S.Error,
    },
    url_name="narrate",
    tags=["Narrator"],
    operation_id="narrate",
    summary="The narrator's proposal for the next turn; appends nothing. Streams server-sent events when asked.",
    openapi_extra={
        "responses": {
            "200": {
                "content": {
                    STREAM_MEDIA_TYPE: {
                        "schema": {
                            "type": "string",
                            "description": "Events start, delta*, then done or error (docs/api.md, Streaming narration).",
                        }
                    }
                }
            }
        }
    },
)
def narrate(request: HttpRequest, save_id: str, payload: S.NarrateRequest):
    from studio.memory.llm import LLMCancelled, LLMError, TrackedLLM, get_llm_backend
    from studio.saves.narrator.prompt import build_narrator_prompt
    from studio.saves.narrator.sampler import resolve_sampler
    from studio.saves.narrator.services import NO_MODEL, NoModelConnected, narrate_once

    save = save_for(user=request.user, save_id=save_id, access=Access.PLAY)
    player_input = payload.player_input
    if not wants_stream(request, payload):
        try:
            narration = narrate_once(game_save=save, player_input=player_input, pov=_narrate_pov(payload))
        except NoModelConnected as exc:
            raise ApiError(503, "no_model", str(exc)) from exc
        except LLMError as exc:
            raise _llm_error(exc) from exc
        return serializers_json(
            narration_json(
                save, player_input, narration.text, narration.response, narration.prompt, narration.continuity
            )
        )

    backend = get_llm_backend()
    if backend is None:
        raise ApiError(503, "no_model", NO_MODEL)
    prompt = build_narrator_prompt(game_save=save, player_input=player_input, pov=_narrate_pov(payload))
    sampler = resolve_sampler(game_save=save, meta=prompt.meta)  # the save's play settings, as the Console's narrations
    watch = client_watch(request)  # None without a socket to watch: the pooled connection, as before
    stream = None
    try:
        stream = TrackedLLM(backend, game_save_id=save.pk).stream(
            system=prompt.system,
            prompt=prompt.user,
            operation="narrate",
            abort=watch.abort if watch else None,
            **sampler.request_options(),
        )
    except LLMCancelled:  # the client left while the model read the prompt
        return client_left()
    except LLMError as exc:  # the spend guard, or a model that cannot be reached: nothing sent yet
        raise _llm_error(exc) from exc
    finally:
        if stream is None and watch is not None:
            watch.stop()
    # The body's end or close stops the watch and closes the model's stream, even if never read.
    events = ClosingBody(_events(save, player_input, prompt, stream), stream.close, watch.stop if watch else None)
    response = StreamingHttpResponse(events, content_type=STREAM_MEDIA_TYPE)
    response["Cache-Control"] = "no-cache"
    response["X-Accel-Buffering"] = "no"  # no proxy buffering: each event as it comes
    return response


def _events(save, player_input: str, prompt, stream):
    from studio.memory.llm import LLMError

    ended = False
    try:
        yield sse_event(
            "start",
            {
                "save_id": save.save_id,
                "turn_id": prompt.turn_id,
                "player_input": player_input,
                "model": getattr(stream.response, "model", ""),
            },
        )
        for delta in stream:
            if delta:
                yield sse_event("delta", {"text": delta})
        ended = True
        if stream.cancelled:
            return  # the client watch ended the model's request: the client has gone, no `done`
    except LLMError as exc:
        ended = True
        error = _llm_error(exc)
        yield sse_event("error", {"error": {"code": error.code, "message": error.message, "details": error.details}})
        return
    finally:
        if not ended:
            stream.close()  # the client went away (GeneratorExit): stop the model too
    response = stream.response
    # The guard reads the whole answer once it has streamed: its findings come in `done` (warn only: what was
    # streamed cannot be narrated again unseen; docs/continuity.md).
    from studio.saves.narrator.guard import check_narration, settings_for

    check = check_narration(game_save=save, text=response.text.strip(), player_input=player_input)
    continuity = (
        None if check is None else {**check.as_dict(), "mode": settings_for(save).mode, "regenerated_from": None}
    )
    yield sse_event("done", narration_json(save, player_input, response.text.strip(), response, prompt, continuity))


def serializers_json(body: dict):
    from django.http import JsonResponse

    return JsonResponse(body, encoder=serializers.ApiJSONEncoder)

"""`/v1/`: the OpenAI-compatible endpoints a chat front end talks to.

- `POST /v1/chat/completions`: a chat-completions request, streamed (`stream: true`, the
  endpoint's server-sent events relayed as they come) or not (its JSON answer as it is).
- `GET /v1/models`: the model names that bind a request to each save the key may play.

Authentication is a studio API token as the bearer key (`Authorization: Bearer axm_...`,
which is what every front end sends as its "API key"); there is no session login and so no
CSRF here. Errors use the OpenAI error shape, `{"error": {"message", "type", "code"}}`,
which front ends show to the player: 401 (no or bad key), 400 (bad body, no save named),
404 (no such save, or one the key's user may not see), 403 (no Playtester role), 409 (the
chat is not this save's, or another request moved the save), 429 (the save's spend guard),
502 (the model could not be reached), 503 (no model configured, or the memory store is
down), 500 (anything else, logged). A refusal by the model's
endpoint itself (its own 4xx) is passed back with its status and body.

A front end that leaves (its Stop, a closed tab) before the model's first token is noticed
where the server hands over the client's socket (gunicorn: `api.disconnect.client_watch`):
the watch, from the relay's opening to the body's end, ends the upstream request at once,
so a single-slot local server is free for the next request (a swipe). Before the answer
began the call is logged "stopped before the answer began", the proposal is "cancelled"
and the view answers 499 (nobody reads it). The bytes a front end that stays receives are
the endpoint's, unchanged. Without a socket to watch (runserver) nothing changes.

CORS, for front ends that call the endpoint from the browser (RisuAI's web build): off unless
`AXIOM_PROXY_CORS_ORIGINS` lists the origins (or `*`). For an allowed `Origin`, a preflight
(`OPTIONS`, which carries no key) is answered 204 with the methods and the headers asked
for, and every answer (errors and streams included) carries `Access-Control-Allow-Origin`
and exposes the `X-Axiom-*` headers. No credentials are allowed: the bearer key is sent by
the front end, never a cookie, so a page cannot use a key it was not given.
"""

from __future__ import annotations

import logging
import time

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest, HttpResponse, JsonResponse, StreamingHttpResponse
from django.contrib.auth.decorators import login_not_required
from django.utils.cache import patch_vary_headers
from django.views.decorators.csrf import csrf_exempt

from studio.api.disconnect import ClosingBody, client_left, client_watch
from studio.api.services import api_token_authenticate
from studio.memory.llm import LLMCancelled, LLMError, RelayRefused, SpendLimitExceeded, TrackedLLM, get_llm_backend
from studio.memory.vector import VectorStoreError
from studio.proxy.binding import SAVE_HEADER, BindingError, binding_for, model_name, universe_model_name
from studio.proxy.body import InvalidBody, read_body
from studio.proxy.chats import chat_save
from studio.proxy.guard import request_key
from studio.proxy.history import InvalidMessages, read_chat
from studio.proxy.services import OPERATION, proposal_findings, proxy_prepare, proxy_relay
from studio.proxy.spending import OverLimit, limits_apply
from studio.proxy.sync import HistoryMismatch
from studio.saves.access import Access, NotFound, RoleRequired, may, save_for
from studio.saves.errors import TurnConflict
from studio.saves.selectors import save_list_for_user
from studio.universes.access import universe_for
from studio.universes.selectors import universe_list_for_user

logger = logging.getLogger(__name__)

MEMORY_TOKENS_HEADER = "X-Axiom-Memory-Tokens"
# "check": the continuity guard reads the answer when it ends (its findings are the proposal's, shown in the
# Console); a whole answer's response says what it found by kind (docs/continuity.md).
CONTINUITY_HEADER = "X-Axiom-Continuity"
MODELS_LISTED = 200


def error(
    status: int, message: str, code: str, kind: str = "invalid_request_error", headers=None, param=None, **extra
) -> JsonResponse:
    """Return an error in the OpenAI shape (`extra`: more fields of the error object)."""
    response = JsonResponse(
        {"error": {"message": message, "type": kind, "code": code, "param": param, **extra}}, status=status
    )
    for key, value in (headers or {}).items():
        response[key] = value
    return response


def _user(request: HttpRequest):
    """Return the user of the request's bearer key, or None."""
    scheme, _, key = request.META.get("HTTP_AUTHORIZATION", "").partition(" ")
    if scheme.lower() != "bearer" or not key.strip():
        return None
    token = api_token_authenticate(key=key.strip())
    return token.user if token is not None else None


def _unauthenticated() -> JsonResponse:
    return error(
        401,
        "Send a studio API token as the API key (Authorization: Bearer axm_...); create one under Account, API tokens.",
        "invalid_api_key",
        headers={"WWW-Authenticate": 'Bearer realm="axiom"'},
    )


EXPOSED_HEADERS = (
    "X-Axiom-Save",
    "X-Axiom-Save-Created",
    "X-Axiom-Turn",
    "X-Axiom-Memory",
    "X-Axiom-Prepare-Ms",
    "X-Axiom-Timing",
    "X-Axiom-Continuity",
    "Retry-After",
    "WWW-Authenticate",
)
CORS_MAX_AGE = 600  # seconds a browser may keep a preflight's answer


def _cors_origin(request: HttpRequest) -> str | None:
    """Return the request's Origin when AXIOM_PROXY_CORS_ORIGINS allows it, else None."""
    origin = request.headers.get("Origin", "").strip()
    allowed = getattr(settings, "AXIOM_PROXY_CORS_ORIGINS", [])
    return origin if origin and ("*" in allowed or origin in allowed) else None


def _with_cors(request: HttpRequest, response: HttpResponse) -> HttpResponse:
    origin = _cors_origin(request)
    if origin:
        response["Access-Control-Allow-Origin"] = origin
        response["Access-Control-Expose-Headers"] = ", ".join(EXPOSED_HEADERS)
    if getattr(settings, "AXIOM_PROXY_CORS_ORIGINS", []):
        patch_vary_headers(response, ("Origin",))  # the answer depends on the Origin: caches keep them apart
    return response


def _preflight(request: HttpRequest, methods: tuple[str, ...]) -> HttpResponse:
    """Answer a CORS preflight from an allowed origin (the methods, the headers it asked for)."""
    response = HttpResponse(status=204)
    response["Access-Control-Allow-Methods"] = ", ".join((*methods, "OPTIONS"))
    asked = request.headers.get("Access-Control-Request-Headers", "")
    response["Access-Control-Allow-Headers"] = (
        asked or f"Authorization, Content-Type, {SAVE_HEADER}, {MEMORY_TOKENS_HEADER}, {CONTINUITY_HEADER}"
    )
    response["Access-Control-Max-Age"] = str(CORS_MAX_AGE)
    return response


def endpoint(*methods: str):
    """Wrap a view: a CORS preflight from an allowed origin, then bearer authentication (401), then the method (405)."""

    def decorator(view):
        def wrapped(request: HttpRequest, *args, **kwargs):
            if request.method == "OPTIONS" and _cors_origin(request):
                return _with_cors(request, _preflight(request, methods))
            return _with_cors(request, handle(request, *args, **kwargs))

        def handle(request: HttpRequest, *args, **kwargs):
            user = _user(request)
            if user is None:
                return _unauthenticated()
            if request.method not in methods:
                return error(
                    405,
                    f"{request.method} is not allowed here.",
                    "method_not_allowed",
                    headers={"Allow": ", ".join(methods)},
                )
            try:
                return view(request, user, *args, **kwargs)
            except VectorStoreError as exc:
                return error(
                    503, f"The memory store cannot be reached: {exc}", "memory_unavailable", kind="server_error"
                )
            except Exception:
                logger.exception("proxy error on %s %s", request.method, request.path)
                return error(500, "The studio failed to handle this request.", "internal_error", kind="server_error")

        wrapped.__name__ = view.__name__
        wrapped.__doc__ = view.__doc__
        return csrf_exempt(login_not_required(wrapped))

    return decorator


@endpoint("GET", "HEAD")
def models(request: HttpRequest, user) -> JsonResponse:
    """List the model names the key's user may play: a save per chat for each universe first
    (`axiom/u/<universe>/<model>`), then each save (`axiom/s/<name>--<save_id>/<model>`), latest played first.

    The id itself reads as what it plays: SillyTavern shows only the ids."""
    backend = get_llm_backend()
    upstream = backend.model_for("narrate") if backend is not None else ""
    playable = may(user, Access.PLAY)
    universes = universe_list_for_user(user=user).order_by("name") if playable else []
    saves = save_list_for_user(user=user).order_by("-last_activity_at", "-id")[:MODELS_LISTED] if playable else []
    data = [
        {
            "id": universe_model_name(universe.slug, upstream),
            "object": "model",
            "created": int(universe.created_at.timestamp()),
            "owned_by": "axiom-studio",
            "name": f"{universe.name}: a new save for each chat",
        }
        for universe in universes
    ] + [
        {
            "id": model_name(game_save.save_id, upstream, name=game_save.name),
            "object": "model",
            "created": int(game_save.created_at.timestamp()),
            "owned_by": "axiom-studio",
            "name": f"{game_save.name} ({game_save.universe.name})",
        }
        for game_save in saves
    ]
    return JsonResponse({"object": "list", "data": data})


def _body(request: HttpRequest) -> dict | JsonResponse:
    try:
        raw = request.body
    except RequestDataTooBig:
        return error(413, "The request body is too large.", "request_too_large")
    try:
        return read_body(raw)
    except InvalidBody as exc:
        return error(400, str(exc), exc.code, param=exc.param)


def _spend_limit(exc: SpendLimitExceeded) -> JsonResponse:
    """429 with `Retry-After`: the save's hourly or the key's user's daily spend guard."""
    return error(
        429,
        f"Paused by the {exc.reason}",
        "spend_limit",
        kind="rate_limit_error",
        headers={"Retry-After": exc.retry_after()},
    )


def _history_conflict(message: str, current_turn: int) -> JsonResponse:
    """409: the chat is not the save's, or another request changed the save first.

    `x-should-retry: false` tells the `openai` SDKs not to retry it (they retry 409 by
    default): a retry would send the same outdated chat again.
    """
    return error(
        409,
        message,
        "history_conflict",
        current_turn=current_turn,
        headers={"x-should-retry": "false", "X-Axiom-Turn": str(current_turn)},
    )


@endpoint("POST")
def chat_completions(request: HttpRequest, user) -> HttpResponse:
    """Sync the bound save to the chat, add its memory, relay to the model, hand the answer back."""
    started = time.perf_counter()
    body = _body(request)
    if isinstance(body, JsonResponse):
        return body
    try:
        binding = binding_for(model=body.get("model"), header=request.headers.get(SAVE_HEADER))
    except BindingError as exc:
        return error(400, str(exc), "model_not_found")
    backend = get_llm_backend()
    if backend is None:
        return error(
            503, "No language model is configured for the studio (AXIOM_LLM_BASE_URL).", "no_model", kind="server_error"
        )
    upstream_model = binding.upstream_model or backend.model_for("narrate")
    universe = game_save = None
    try:
        if binding.universe_slug:
            universe = universe_for(user=user, slug=binding.universe_slug, access=Access.PLAY)
        else:
            game_save = save_for(user=user, save_id=binding.save_id, access=Access.PLAY)
    except NotFound:
        what = f"universe {binding.universe_slug!r}" if binding.universe_slug else f"save {binding.save_id!r}"
        return error(
            404,
            f"No {what}, or this key may not see it.",
            "universe_not_found" if binding.universe_slug else "save_not_found",
        )
    except RoleRequired as exc:
        return error(403, str(exc), "permission_denied", kind="permission_error")
    try:  # the operator's limits, before a save is made or synced
        body = limits_apply(body, upstream_model=upstream_model, narrate_model=backend.model_for("narrate"))
    except OverLimit as exc:
        return error(400, str(exc), exc.code, param=exc.param)
    created = False
    try:  # the spend guards (the user's day, the save's hour), before anything is written
        TrackedLLM(backend, game_save_id=game_save.pk if game_save else None, user_id=user.pk).preflight(OPERATION)
        if universe is not None:
            game_save, created = chat_save(user=user, universe=universe, chat=read_chat(body.get("messages")))
            TrackedLLM(backend, game_save_id=game_save.pk).preflight(OPERATION)
    except SpendLimitExceeded as exc:
        return _spend_limit(exc)
    except InvalidMessages as exc:
        return error(400, str(exc), "invalid_messages", param=exc.param)
    try:
        prepared = proxy_prepare(
            game_save=game_save,
            body=body,
            upstream_model=upstream_model,
            memory_tokens=request.headers.get(MEMORY_TOKENS_HEADER),
            key=request_key(headers=request.headers, body=request.body),
        )
    except InvalidMessages as exc:
        return error(400, str(exc), "invalid_messages", param=exc.param)
    except TurnConflict as exc:
        return _history_conflict(str(exc), exc.current_turn)
    except HistoryMismatch as exc:
        return _history_conflict(str(exc), game_save.current_turn)
    prepared_ms = (time.perf_counter() - started) * 1000
    watch = client_watch(request)  # None without a socket to watch: the pooled connection, as before
    relay = None
    try:
        relay = proxy_relay(
            prepared,
            backend=backend,
            abort=watch.abort if watch else None,
            user_id=user.pk,
            check_now=request.headers.get(CONTINUITY_HEADER, "").strip().lower() == "check",
            preflighted=True,  # the save's and the user's guards, above
        )
    except LLMCancelled:  # the front end left while the model read the prompt
        return client_left()
    except SpendLimitExceeded as exc:
        return _spend_limit(exc)
    except RelayRefused as exc:
        return HttpResponse(exc.body, status=exc.status, content_type=exc.content_type)
    except LLMError as exc:
        return error(502, f"The model could not be reached: {exc}", "upstream_unavailable", kind="server_error")
    finally:
        if relay is None and watch is not None:
            watch.stop()
    headers = {
        "X-Axiom-Save": game_save.save_id,
        "X-Axiom-Save-Created": "true" if created else "false",
        "X-Axiom-Turn": str(game_save.current_turn),
        "X-Axiom-Memory": prepared.placed,
        "X-Axiom-Prepare-Ms": f"{prepared_ms:.1f}",
        "X-Axiom-Timing": ", ".join(f"{name}={ms}" for name, ms in prepared.timings.items()),
    }
    if prepared.stream:
        # The body's end or close stops the watch (the relay's own bytes pass unchanged).
        response = StreamingHttpResponse(
            ClosingBody(relay, watch.stop if watch else None), content_type=relay.content_type
        )
        response["Cache-Control"] = "no-cache"
        response["X-Accel-Buffering"] = "no"  # nginx: pass the events on as they come
    else:
        try:
            content = relay.read()
        finally:
            if watch is not None:
                watch.stop()
        if relay.cancelled:
            return client_left()  # the front end left while the whole answer was awaited
        response = HttpResponse(content, content_type=relay.content_type)
        if (
            prepared.alternative_id is not None
            and request.headers.get(CONTINUITY_HEADER, "").strip().lower() == "check"
        ):
            headers[CONTINUITY_HEADER] = proposal_findings(alternative_id=prepared.alternative_id)
    for key, value in headers.items():
        response[key] = value
    return response

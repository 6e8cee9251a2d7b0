"""The plumbing every API view shares: authentication, methods, CSRF, bodies, pages.

Authentication (see docs/api.md, "Authentication"):
- `Authorization: Bearer <key>`: the token's user. CSRF does not apply: a browser never
  attaches this header on its own, so a forged cross-site request cannot carry it.
- no Authorization header but a studio session: the session's user, so a logged-in author
  can open the API in a browser. Unsafe methods (POST) then need a valid CSRF token, exactly
  as the studio's own forms do, because the browser attaches the session cookie by itself.
- neither: 401 with `WWW-Authenticate: Bearer`.
A malformed, unknown or revoked bearer key is 401 even when a session is present: a client
that sends a key means to be that key's user.
"""

from __future__ import annotations

import json
import re
from functools import wraps
from typing import Any

from django.conf import settings
from django.contrib.auth.decorators import login_not_required
from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest
from django.middleware.csrf import CsrfViewMiddleware

from studio import limits
from studio.api.errors import ApiError, validation_error
from studio.api.services import api_token_authenticate

SAFE_METHODS = {"GET", "HEAD", "OPTIONS"}
# How deeply a request body's arrays and objects may nest (the body object itself is level 1),
# as a save file's (saves/portable/registry.py). Deeper bodies, which would make the parser or
# anything after it run out of stack, are refused with 400.
MAX_JSON_DEPTH = 64
# A UTF-16 surrogate left in a parsed string: JSON's "\ud800" escape without its pair. Paired
# escapes decode to one character outside this range, so whatever matches is lone.
LONE_SURROGATE = re.compile("[\ud800-\udfff]")
BEARER_CHALLENGE = {"WWW-Authenticate": 'Bearer realm="axiom"'}


def _unauthenticated(message: str, code: str = "not_authenticated") -> ApiError:
    return ApiError(401, code, message, headers=BEARER_CHALLENGE)


def authenticate(request: HttpRequest) -> None:
    """Set `request.user` and `request.api_token` from the bearer key or the session.

    Raise ApiError 401 when neither identifies an active user.
    """
    header = request.META.get("HTTP_AUTHORIZATION", "")
    request.api_token = None
    if header:
        scheme, _, key = header.partition(" ")
        if scheme.lower() != "bearer" or not key.strip():
            raise _unauthenticated("Use 'Authorization: Bearer <token>'.", "invalid_authorization_header")
        token = api_token_authenticate(key=key.strip())
        if token is None:
            raise _unauthenticated("The token is unknown or revoked.", "invalid_token")
        request.user = token.user
        request.api_token = token
        return
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        raise _unauthenticated("Authentication required: send 'Authorization: Bearer <token>'.")


def _check_csrf(request: HttpRequest) -> None:
    """Run Django's CSRF check on a session-authenticated unsafe request."""

    def no_response(_request):  # pragma: no cover - never called by process_view
        return None

    rejection = CsrfViewMiddleware(no_response).process_view(request, None, (), {})
    if rejection is not None:
        raise ApiError(
            403,
            "csrf_failed",
            "Session-authenticated API writes need a CSRF token; engines should use a bearer token.",
        )


def guard(view, methods: tuple[str, ...]):
    """Wrap one URL's view (django-ninja's, for every method the URL answers) with the API's checks.

    Order of checks: authentication (401), method (405), CSRF for session writes (403), so an
    anonymous client learns nothing about a route, not even its methods. Then `view` runs:
    django-ninja parses and validates the parameters and body and calls the endpoint; the
    errors it raises become JSON in `studio.api.ninja_api`. `api_methods` on the result lists
    the methods (tests walk the URL patterns with it).
    """
    allowed = set(methods)
    if "GET" in allowed:
        allowed.add("HEAD")

    @wraps(view)
    def wrapped(request: HttpRequest, *args, **kwargs):
        try:
            authenticate(request)
            if request.method not in allowed:
                raise ApiError(
                    405,
                    "method_not_allowed",
                    f"{request.method} is not allowed here.",
                    {"allowed": sorted(allowed - {"HEAD"})},
                    headers={"Allow": ", ".join(sorted(allowed))},
                )
            if request.api_token is None and request.method not in SAFE_METHODS:
                _check_csrf(request)
        except ApiError as exc:
            return exc.response()
        if request.method not in SAFE_METHODS and _declared_length(request) == 0:
            request._body = b"{}"  # no body is an empty object, as it always was (the fields' defaults apply)
        if request.method == "HEAD":
            request.method = "GET"  # django-ninja routes HEAD nowhere; Django drops the body of the answer
        return view(request, *args, **kwargs)

    wrapped.api_methods = tuple(sorted(set(methods)))
    wrapped.csrf_exempt = True  # the CSRF check above is the API's own, for session writes only
    return login_not_required(wrapped)


def _declared_length(request: HttpRequest) -> int | None:
    try:
        return int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        return None


def json_body(request: HttpRequest) -> dict[str, Any]:
    """Return the request's JSON object body, or raise 413 / 415 / 400."""
    limit = settings.AXIOM_API_MAX_BODY_BYTES
    try:
        declared = int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        raise ApiError(400, "bad_request", "Content-Length is not a number.") from None
    if declared > limit:
        raise body_too_large(limit)
    content_type = request.content_type or ""
    if declared and content_type != "application/json":
        raise ApiError(
            415, "unsupported_media_type", "Send the body as application/json.", {"content_type": content_type}
        )
    try:
        raw = request.body
    except RequestDataTooBig:
        raise body_too_large(limit) from None
    if len(raw) > limit:
        raise body_too_large(limit)
    if not raw.strip():
        return {}
    try:
        data = json.loads(raw, **limits.strict_json_hooks())  # no key twice in an object, no NaN / Infinity
    except (UnicodeDecodeError, ValueError) as exc:
        raise ApiError(400, "invalid_json", "The body is not valid JSON.", {"reason": str(exc)[:200]}) from exc
    except RecursionError:
        raise _too_deep() from None
    if not isinstance(data, dict):
        raise ApiError(400, "invalid_json", "The body must be a JSON object.")
    _refuse_unstorable(data)
    return data


def _too_deep() -> ApiError:
    return ApiError(
        400,
        "invalid_json",
        f"The body is nested more than {MAX_JSON_DEPTH} levels deep.",
        {"max_depth": MAX_JSON_DEPTH},
    )


def _json_path(parts: tuple) -> str:
    out = ""
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(body)"


def _refuse_unstorable(data: dict) -> None:
    """Refuse nesting past MAX_JSON_DEPTH and lone surrogates, walking the body without recursion.

    Raise 400 invalid_json for depth, 400 validation_error naming each string (or the object
    whose key) that holds a lone surrogate: nothing can store or encode it as UTF-8.
    """
    message = "Contains a lone UTF-16 surrogate, which is not valid Unicode."
    problems: dict[str, list[str]] = {}
    stack: list[tuple[object, tuple, int]] = [(data, (), 1)]
    while stack and len(problems) < 10:
        value, path, depth = stack.pop()
        if isinstance(value, str):
            if LONE_SURROGATE.search(value):
                problems.setdefault(_json_path(path), []).append(message)
        elif isinstance(value, (dict, list)):
            if depth > MAX_JSON_DEPTH:
                raise _too_deep()
            if isinstance(value, dict):
                for key, child in value.items():
                    if LONE_SURROGATE.search(key):
                        problems.setdefault(_json_path(path), []).append("A key " + message[0].lower() + message[1:])
                        continue
                    stack.append((child, path + (key,), depth + 1))
            else:
                stack.extend((child, path + (index,), depth + 1) for index, child in enumerate(value))
    if problems:
        raise validation_error(problems)


def body_too_large(limit: int) -> ApiError:
    return ApiError(413, "body_too_large", f"The body exceeds the limit of {limit} bytes.", {"max_bytes": limit})


def page(items: list, *, limit: int, offset: int, total: int | None = None) -> dict:
    """Return one page of `items`, which holds at most limit + 1 rows starting at `offset`."""
    has_more = len(items) > limit
    body = {
        "items": items[:limit],
        "limit": limit,
        "offset": offset,
        "next_offset": offset + limit if has_more else None,
    }
    if total is not None:
        body["total"] = total
    return body

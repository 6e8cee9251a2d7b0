"""The plumbing every API view shares: authentication, methods, CSRF, bodies, parameters.

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
import logging
import re
from functools import wraps
from typing import Any

from django.conf import settings
from django.contrib.auth.decorators import login_not_required
from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest
from django.middleware.csrf import CsrfViewMiddleware
from django.views.decorators.csrf import csrf_exempt

from studio.api.errors import ApiError, error_response, validation_error
from studio.api.services import api_token_authenticate

logger = logging.getLogger(__name__)

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


def api_view(*methods: str):
    """Wrap a function view as an API endpoint answering only `methods`.

    Order of checks: authentication (401), method (405), CSRF for session writes (403). Any
    ApiError raised by the view becomes its JSON error; an unexpected exception becomes a
    JSON 500 (and is logged) rather than an HTML page.
    """
    allowed = set(methods)
    if "GET" in allowed:
        allowed.add("HEAD")

    def decorator(view):
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
                return view(request, *args, **kwargs)
            except ApiError as exc:
                return exc.response()
            except Exception:
                from studio.api.faults import translate_exception

                translated = translate_exception()
                if translated is not None:
                    return translated.response()
                logger.exception("API error on %s %s", request.method, request.path)
                return error_response(500, "internal_error", "The server failed to handle this request.")

        wrapped.api_methods = tuple(sorted(set(methods)))
        return csrf_exempt(login_not_required(wrapped))

    return decorator


def json_body(request: HttpRequest) -> dict[str, Any]:
    """Return the request's JSON object body, or raise 413 / 415 / 400."""
    limit = settings.AXIOM_API_MAX_BODY_BYTES
    try:
        declared = int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        raise ApiError(400, "bad_request", "Content-Length is not a number.")
    if declared > limit:
        raise body_too_large(limit)
    content_type = request.content_type or ""
    if declared and content_type != "application/json":
        raise ApiError(415, "unsupported_media_type", "Send the body as application/json.", {"content_type": content_type})
    try:
        raw = request.body
    except RequestDataTooBig:
        raise body_too_large(limit)
    if len(raw) > limit:
        raise body_too_large(limit)
    if not raw.strip():
        return {}
    try:
        data = json.loads(raw, parse_constant=_refuse_constant)
    except (UnicodeDecodeError, ValueError) as exc:
        raise ApiError(400, "invalid_json", "The body is not valid JSON.", {"reason": str(exc)[:200]})
    except RecursionError:
        raise _too_deep()
    if not isinstance(data, dict):
        raise ApiError(400, "invalid_json", "The body must be a JSON object.")
    _refuse_unstorable(data)
    return data


def _too_deep() -> ApiError:
    return ApiError(
        400, "invalid_json", f"The body is nested more than {MAX_JSON_DEPTH} levels deep.", {"max_depth": MAX_JSON_DEPTH}
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


def _refuse_constant(name: str):
    # NaN and Infinity are not JSON (RFC 8259) and PostgreSQL's jsonb refuses them.
    raise ValueError(f"{name} is not valid JSON")


def body_too_large(limit: int) -> ApiError:
    return ApiError(413, "body_too_large", f"The body exceeds the limit of {limit} bytes.", {"max_bytes": limit})


class Params:
    """Read typed values out of a JSON body or a query string, collecting every problem.

    Call `.done()` after reading: it raises one 400 listing all invalid fields, so a client
    sees every mistake at once.
    """

    def __init__(self, source, *, from_query: bool = False):
        self.source = source
        self.from_query = from_query
        self.errors: dict[str, list[str]] = {}

    def _error(self, name: str, message: str) -> None:
        self.errors.setdefault(name, []).append(message)

    def _raw(self, name: str):
        if self.from_query:
            values = self.source.getlist(name)
            if not values:
                return None
            return values[-1]
        return self.source.get(name)

    def string(self, name: str, *, required: bool = False, default: str | None = None,
               max_length: int | None = None, allow_blank: bool = True, choices=None) -> str | None:
        value = self._raw(name)
        if value is None:
            if required:
                self._error(name, "This field is required.")
            return default
        if not isinstance(value, str):
            self._error(name, "Must be a string.")
            return default
        if "\x00" in value:
            # PostgreSQL cannot store NUL in text; refuse it on every database alike.
            self._error(name, "Must not contain NUL characters.")
            return default
        if not allow_blank and not value.strip():
            self._error(name, "Must not be blank.")
            return default
        if max_length is not None and len(value) > max_length:
            self._error(name, f"At most {max_length} characters.")
            return default
        if choices is not None and value not in choices:
            self._error(name, f"Must be one of: {', '.join(choices)}.")
            return default
        return value

    def integer(self, name: str, *, required: bool = False, default: int | None = None,
                minimum: int | None = None, maximum: int | None = None) -> int | None:
        value = self._raw(name)
        if value is None or (self.from_query and value == ""):
            if required:
                self._error(name, "This field is required.")
            return default
        if isinstance(value, bool):
            self._error(name, "Must be an integer.")
            return default
        if isinstance(value, str) and self.from_query:
            try:
                value = int(value)
            except ValueError:
                self._error(name, "Must be an integer.")
                return default
        if not isinstance(value, int):
            self._error(name, "Must be an integer.")
            return default
        if minimum is not None and value < minimum:
            self._error(name, f"Must be >= {minimum}.")
            return default
        if maximum is not None and value > maximum:
            self._error(name, f"Must be <= {maximum}.")
            return default
        return value

    def boolean(self, name: str, *, default: bool | None = None) -> bool | None:
        value = self._raw(name)
        if value is None:
            return default
        if self.from_query and isinstance(value, str):
            lowered = value.lower()
            if lowered in {"1", "true", "yes"}:
                return True
            if lowered in {"0", "false", "no"}:
                return False
        if isinstance(value, bool):
            return value
        self._error(name, "Must be a boolean.")
        return default

    def string_list(self, name: str, *, max_items: int = 50, max_length: int = 200) -> list[str] | None:
        if self.from_query:
            values = [v for v in self.source.getlist(name) if v != ""]
            if any("\x00" in v for v in values):
                self._error(name, "Must not contain NUL characters.")
                return None
            return values or None
        value = self.source.get(name)
        if value is None:
            return None
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            self._error(name, "Must be a list of strings.")
            return None
        if any("\x00" in v for v in value):
            self._error(name, "Must not contain NUL characters.")
            return None
        if len(value) > max_items:
            self._error(name, f"At most {max_items} items.")
            return None
        if any(len(v) > max_length for v in value):
            self._error(name, f"Each item at most {max_length} characters.")
            return None
        return value

    def json_object(self, name: str, *, default=None):
        value = self._raw(name)
        if value is None:
            return default
        if not isinstance(value, dict):
            self._error(name, "Must be a JSON object.")
            return default
        if "\\u0000" in json.dumps(value):
            self._error(name, "Must not contain NUL characters.")
            return default
        return value

    def done(self) -> None:
        if self.errors:
            raise validation_error(self.errors)


def page_params(request: HttpRequest, *, default_limit: int = 50, max_limit: int = 200) -> tuple[Params, int, int]:
    """Read `limit` and `offset` from the query string (validated with the other params)."""
    params = Params(request.GET, from_query=True)
    limit = params.integer("limit", default=default_limit, minimum=1, maximum=max_limit)
    offset = params.integer("offset", default=0, minimum=0, maximum=1_000_000)
    return params, limit, offset


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

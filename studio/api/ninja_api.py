"""The django-ninja application behind /api/v1/: one router, the body parser, the error handlers, the URLs.

- `router`: every endpoint registers on it (`@router.get(...)`, `@router.post(...)` in
  views.py and views_portable.py) with its typed parameters and response schemas.
- `BodyParser`: the body goes through `studio.api.http.json_body` (size 413, media type 415,
  invalid JSON, NaN, nesting and lone surrogates 400) before pydantic sees it.
- the exception handlers turn ninja's validation errors into the API's one 400
  `validation_error` ({field: [messages]}, every field at once, in the API's own words), an
  `ApiError` into its response, and anything else through `faults.translate_exception` or
  into a logged JSON 500.
- `api_urlpatterns()`: one Django URL per path, wrapped by `http.guard` (401, then 405, then
  CSRF for session writes), named as before (`api:save_detail`, ...).
"""

from __future__ import annotations

import logging
from typing import Any

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.http import Http404, HttpRequest
from django.urls import path as django_path
from ninja import NinjaAPI, Router
from ninja.errors import HttpError, ValidationError
from ninja.parser import Parser

from studio.api.errors import ApiError, error_response, validation_error
from studio.api.http import body_too_large, guard, json_body

logger = logging.getLogger(__name__)

API_TITLE = "Axiom Studio engine API"
API_VERSION = "1.0.0"


class BodyParser(Parser):
    def parse_body(self, request: HttpRequest) -> dict[str, Any]:
        return json_body(request)


api = NinjaAPI(
    title=API_TITLE,
    version=API_VERSION,
    description="Append turns, query narrative memory, rewind and fork saves. See docs/api.md for "
    "authentication, errors and examples.",
    urls_namespace="api",
    docs_url=None,  # served by views_docs.py, behind the API's authentication, from static files
    openapi_url=None,  # served as an endpoint (`openapi.json`), like every other route
    parser=BodyParser(),
)
router = Router()

# What pydantic's error types say in the API's words (the messages it used before django-ninja).
MESSAGES = {
    "missing": lambda ctx: "This field is required.",
    "int_type": lambda ctx: "Must be an integer.",
    "int_parsing": lambda ctx: "Must be an integer.",
    "int_from_float": lambda ctx: "Must be an integer.",
    "string_type": lambda ctx: "Must be a string.",
    "bool_type": lambda ctx: "Must be a boolean.",
    "bool_parsing": lambda ctx: "Must be a boolean.",
    "dict_type": lambda ctx: "Must be a JSON object.",
    "list_type": lambda ctx: "Must be a list of strings.",
    "greater_than_equal": lambda ctx: f"Must be >= {ctx['ge']}.",
    "less_than_equal": lambda ctx: f"Must be <= {ctx['le']}.",
    "string_too_long": lambda ctx: f"At most {ctx['max_length']} characters.",
    "too_long": lambda ctx: f"At most {ctx['max_length']} items.",
    "literal_error": lambda ctx: f"Must be one of: {ctx['expected']}.",
}
# The name a view gives its one body or query parameter: not part of the field's name.
PARAMETER_NAMES = {"payload", "params"}


def _field_name(loc: tuple) -> str:
    """The field an error is about: its location less the source (body, query) and the parameter name."""
    parts = [part for part in loc[1:] if part not in PARAMETER_NAMES]
    names = [part for part in parts if isinstance(part, str)]
    return names[0] if names else "(body)"


def validation_details(errors: list[dict]) -> dict[str, list[str]]:
    details: dict[str, list[str]] = {}
    for error in errors:
        render = MESSAGES.get(error.get("type", ""))
        message = render(error.get("ctx") or {}) if render else error.get("msg", "Invalid value.")
        messages = details.setdefault(_field_name(tuple(error.get("loc", ()))), [])
        if message not in messages:
            messages.append(message)
    return details


@api.exception_handler(ValidationError)
def _on_validation_error(request: HttpRequest, exc: ValidationError):
    return validation_error(validation_details(exc.errors)).response()


@api.exception_handler(ApiError)
def _on_api_error(request: HttpRequest, exc: ApiError):
    return exc.response()


@api.exception_handler(HttpError)
def _on_http_error(request: HttpRequest, exc: HttpError):
    # django-ninja wraps what the body parser raised ("Cannot parse request body"): answer the cause.
    if isinstance(exc.__cause__, ApiError):
        return exc.__cause__.response()
    return error_response(exc.status_code, "bad_request" if exc.status_code == 400 else "error", str(exc.message))


@api.exception_handler(RequestDataTooBig)
def _on_too_big(request: HttpRequest, exc: RequestDataTooBig):
    return body_too_large(settings.AXIOM_API_MAX_BODY_BYTES).response()


@api.exception_handler(Http404)  # ninja has its own answer for Http404; the API's is in faults.py
@api.exception_handler(Exception)
def _on_exception(request: HttpRequest, exc: Exception):
    from studio.api.faults import translate_exception

    translated = translate_exception(exc)
    if translated is not None:
        return translated.response()
    logger.error("API error on %s %s", request.method, request.path, exc_info=exc)
    return error_response(500, "internal_error", "The server failed to handle this request.")


def api_urlpatterns(extra: list | None = None) -> list:
    """Return one URL pattern per API path (each method of a path is one of its operations)."""
    api.add_router("", router)
    patterns = []
    for bound in api._get_bound_routers():  # django-ninja's mounted routers (pinned in pyproject)
        for route, path_view in bound.path_operations.items():
            methods = tuple(sorted({m for op in path_view.operations for m in op.methods}))
            name = path_view.url_name or next(op.url_name for op in path_view.operations if op.url_name)
            django_route = route.lstrip("/").replace("{", "<").replace("}", ">")
            patterns.append(django_path(django_route, guard(path_view.get_view(), methods), name=name))
    return patterns + list(extra or [])

"""The API's description: `openapi.json` (generated), the interactive docs page (Swagger UI from static files); the JSON 404.

`GET /api/v1/docs` renders the generated document (`openapi.json`) with Swagger UI, as
django-ninja ships it in its static files (`ninja/swagger-ui-bundle.js`, `swagger-ui-init.js`,
`swagger-ui.css`): nothing from a CDN and no inline script, so the page works under the
studio's self-only Content-Security-Policy (studio/middleware.py). Like every API route it
needs a token or a session.
"""

from __future__ import annotations

import json
from typing import Any

from django.http import HttpRequest, JsonResponse
from django.shortcuts import render
from django.urls import reverse

from studio.api import schemas as S
from studio.api.errors import ApiError
from studio.api.http import guard
from studio.api.ninja_api import router
from studio.api.openapi import build_openapi


@router.get(
    "/openapi.json",
    response={200: dict[str, Any], 401: S.Error},
    url_name="openapi",
    tags=["Meta"],
    operation_id="getOpenApi",
    summary="This document.",
)
def openapi_document(request: HttpRequest):
    return JsonResponse(build_openapi(server_url=request.build_absolute_uri("/api/v1")))


@router.get(
    "/docs",
    response={401: S.Error},
    url_name="docs",
    tags=["Meta"],
    operation_id="getDocs",
    summary="Interactive docs (Swagger UI) for this document, from the studio's static files.",
    openapi_extra={
        "responses": {"200": {"description": "An HTML page.", "content": {"text/html": {"schema": {"type": "string"}}}}}
    },
)
def docs_page(request: HttpRequest):
    settings = {"url": reverse("api:openapi"), "layout": "BaseLayout", "deepLinking": True}
    # Escape "<" so no string in the settings can close the JSON <script> block.
    text = json.dumps(settings).replace("<", "\\u003c")
    return render(request, "api/docs.html", {"swagger_settings": text})


def _unknown(request: HttpRequest, *args, **kwargs) -> JsonResponse:
    return ApiError(404, "not_found", f"No API endpoint at {request.path}.").response()


unknown_endpoint = guard(_unknown, ("DELETE", "GET", "PATCH", "POST", "PUT"))

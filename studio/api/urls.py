"""The JSON API, version 1, mounted at /api/v1/: the django-ninja endpoints (the docs page among them), a JSON 404.

Each endpoint module registers its routes on `studio.api.ninja_api.router` when imported here;
`api_urlpatterns` turns them into one URL per path (named as `url_name` says), each behind
the API's authentication, method and CSRF checks (`studio.api.http.guard`).
"""

from django.urls import re_path

from studio.api import (
    views,
    views_chapters,
    views_docs,
    views_memory,
    views_memory_tests,
    views_narrate,
    views_play,
    views_portable,
)
from studio.api.ninja_api import api_urlpatterns

# Imported for what importing them does: each registers its routes on the router.
ROUTE_MODULES = (
    views,
    views_chapters,
    views_docs,
    views_memory,
    views_memory_tests,
    views_narrate,
    views_play,
    views_portable,
)

app_name = "api"

urlpatterns = api_urlpatterns() + [
    # Anything else under /api/v1/ answers a JSON 404 (after authentication), not an HTML page.
    re_path(r"^.*$", views_docs.unknown_endpoint, name="unknown"),
]

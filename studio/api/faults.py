"""Map the domain's errors and failures of what the API stands on (vector store, database) to JSON errors.

Access (`studio.universes.access`): `NotFound` is 404 `not_found` naming what was asked for
(a save, a universe), whether it does not exist or may not be seen; `RoleRequired` is 403
`permission_denied` with the role the action needs. Pages get 404 / 403 from the same errors.

Called from the API's exception handler (`ninja_api.py`); returns None for anything it does not
recognise, which then becomes a logged 500.
"""

from __future__ import annotations

import sys

from django.db import IntegrityError, OperationalError

from studio.api.errors import ApiError, not_found, permission_denied

RETRY_AFTER_SECONDS = "5"


def translate_exception(exc: BaseException | None = None) -> ApiError | None:
    exc = exc or sys.exc_info()[1]
    if exc is None:
        return None
    from django.core.exceptions import PermissionDenied
    from django.http import Http404

    from studio.memory.recall.query_params import InvalidParameters
    from studio.memory.vector import is_store_failure
    from studio.saves.checkpoints import RewindError
    from studio.universes.access import NotFound, RoleRequired

    if isinstance(exc, NotFound):
        return not_found(exc.what)
    if isinstance(exc, RoleRequired):
        return permission_denied(str(exc))
    if isinstance(exc, Http404):  # from a shared selector (a turn the page asks for)
        return ApiError(404, "not_found", "No such resource, or you may not see it.")
    if isinstance(exc, PermissionDenied):
        return ApiError(403, "permission_denied", str(exc) or "You may not do this.")
    if isinstance(exc, RewindError):
        return ApiError(400, "validation_error", str(exc), {"turn_id": [str(exc)]})
    if isinstance(exc, InvalidParameters):  # found with the save's data: a point of view naming no character
        return ApiError(400, "validation_error", str(exc), {name: [message] for name, message in exc.errors.items()})
    if is_store_failure(exc):
        return ApiError(
            503,
            "vector_store_unavailable",
            "The vector store is not reachable; retry shortly.",
            {"reason": str(exc)[:300]},
            headers={"Retry-After": RETRY_AFTER_SECONDS},
        )
    if isinstance(exc, OperationalError) and "locked" in str(exc).lower():
        return ApiError(
            503,
            "database_busy",
            "The database is busy; retry shortly.",
            headers={"Retry-After": RETRY_AFTER_SECONDS},
        )
    if isinstance(exc, IntegrityError):
        return ApiError(
            409, "conflict", "The request conflicts with a concurrent change; read the save again and retry."
        )
    return None

"""The API's one error shape: {"error": {"code", "message", "details"}} with a fitting status."""

from __future__ import annotations

from typing import Any

from django.http import JsonResponse


class ApiError(Exception):
    """Raised anywhere under an API view; the view wrapper turns it into a JSON response."""

    def __init__(self, status: int, code: str, message: str, details: Any = None, headers: dict | None = None):
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.details = details if details is not None else {}
        self.headers = headers or {}

    def response(self) -> JsonResponse:
        return error_response(self.status, self.code, self.message, self.details, headers=self.headers)


def error_response(
    status: int, code: str, message: str, details: Any = None, *, headers: dict | None = None
) -> JsonResponse:
    response = JsonResponse(
        {"error": {"code": code, "message": message, "details": details if details is not None else {}}},
        status=status,
    )
    for name, value in (headers or {}).items():
        response[name] = value
    return response


def validation_error(details: dict[str, list[str]], message: str = "The request is not valid.") -> ApiError:
    return ApiError(400, "validation_error", message, details)


def not_found(what: str = "resource") -> ApiError:
    return ApiError(404, "not_found", f"No such {what}, or you may not see it.")


def permission_denied(message: str) -> ApiError:
    return ApiError(403, "permission_denied", message)


def conflict(message: str, details: Any = None) -> ApiError:
    return ApiError(409, "conflict", message, details)

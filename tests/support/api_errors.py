"""The API's error envelope, as the API tests check it."""

from __future__ import annotations


def error_code(response) -> str:
    """The `error.code` of a JSON error response, after checking the envelope's shape."""
    assert response["Content-Type"].startswith("application/json"), response.content[:200]
    body = response.json()
    assert set(body["error"]) == {"code", "message", "details"}, body
    return body["error"]["code"]

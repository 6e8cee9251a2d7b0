"""Reads for the API: a user's tokens, and the saves a user may reach through the API."""

from __future__ import annotations

from django.db.models import QuerySet

from studio.api.models import ApiToken


def api_token_list_for_user(*, user) -> QuerySet[ApiToken]:
    return ApiToken.objects.filter(user=user).order_by("revoked_at", "-created_at")

"""Pages where a user creates and revokes their own API tokens (login required, CSRF on)."""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_POST

from studio.api.selectors import api_token_list_for_user
from studio.api.services import api_token_create, api_token_revoke

TEMPLATE = "api/tokens.html"


def _context(request: HttpRequest, **extra) -> dict:
    return {"tokens": api_token_list_for_user(user=request.user), **extra}


@require_GET
def token_list(request: HttpRequest) -> HttpResponse:
    return render(request, TEMPLATE, _context(request))


@require_POST
@never_cache
def token_create(request: HttpRequest) -> HttpResponse:
    """Create a token and show its key on this response only; it is never retrievable again."""
    name = request.POST.get("name", "").strip()
    if not name or len(name) > 100:
        return render(
            request, TEMPLATE, _context(request, name_error="Give the token a name of 1 to 100 characters."), status=400
        )
    token, key = api_token_create(user=request.user, name=name)
    return render(request, TEMPLATE, _context(request, new_token=token, new_key=key), status=201)


@require_POST
def token_revoke(request: HttpRequest, token_id: int) -> HttpResponse:
    token = get_object_or_404(api_token_list_for_user(user=request.user), pk=token_id)
    api_token_revoke(token=token)
    if request.htmx:
        return render(request, f"{TEMPLATE}#token-rows", _context(request))
    messages.success(request, f"Token “{token.name}” revoked.")
    return redirect("api_tokens:list")

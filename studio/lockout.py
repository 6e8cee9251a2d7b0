"""Login throttling (django-axes): which address a login attempt comes from, and the lockout page.

Axes counts failed logins per account and per address (settings, "Login throttling"). The
address is REMOTE_ADDR, the peer gunicorn saw, unless `AXIOM_PROXY_COUNT` says that many
trusted proxies stand in front: each appends the address it received the request from to
`X-Forwarded-For`, so the entry that many places from the right is the one the outermost
trusted proxy saw. Entries further left were written by the client and are never trusted,
so a client cannot reset its count by sending its own header. With `AXIOM_TRUSTED_PROXIES`
set, the header is read only on requests whose peer is one of those addresses: a client that
reaches gunicorn's port directly, past the proxy, is counted against its own address.
"""

from __future__ import annotations

import ipaddress
from functools import lru_cache

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render


def client_ip(request: HttpRequest) -> str | None:
    """Return the address a login attempt is counted against."""
    remote = request.META.get("REMOTE_ADDR") or None
    proxies = settings.AXIOM_PROXY_COUNT
    if proxies <= 0:
        return remote
    trusted = _networks(tuple(settings.AXIOM_TRUSTED_PROXIES))
    if trusted and not _within(remote, trusted):
        return remote
    forwarded = [part.strip() for part in request.META.get("HTTP_X_FORWARDED_FOR", "").split(",") if part.strip()]
    if len(forwarded) < proxies:
        # Fewer entries than proxies: the request did not come through all of them.
        return remote
    return forwarded[-proxies]


def lockout_response(request: HttpRequest, original_response=None, credentials: dict | None = None) -> HttpResponse:
    """The page a locked-out login gets (429): why, for how long, and who can unlock it."""
    minutes = settings.AXIOM_LOGIN_COOLOFF_MINUTES
    response = render(
        request,
        "registration/locked_out.html",
        {"failure_limit": settings.AXES_FAILURE_LIMIT, "cooloff_minutes": minutes},
        status=429,
    )
    if minutes:
        response["Retry-After"] = str(minutes * 60)
    return response


@lru_cache(maxsize=8)
def _networks(entries: tuple[str, ...]) -> tuple:
    """The trusted proxies as networks (a bare address is a one-address network)."""
    return tuple(ipaddress.ip_network(entry.strip(), strict=False) for entry in entries if entry.strip())


def _within(address: str | None, networks: tuple) -> bool:
    try:
        ip = ipaddress.ip_address(address or "")
    except ValueError:
        return False
    return any(ip in network for network in networks)

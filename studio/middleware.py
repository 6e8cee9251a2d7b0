"""What Django 5.2 does not do by itself: security headers, and a cap on request bodies."""

from __future__ import annotations

from django.conf import settings
from django.http import HttpResponse

DEFAULT_CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "font-src 'self'; connect-src 'self'; object-src 'none'; base-uri 'self'; "
    "form-action 'self'; frame-ancestors 'none'"
)


class ContentSecurityPolicyMiddleware:
    """Add a Content-Security-Policy that allows only this origin.

    Pages carry no inline script or style: htmx is served from static files and its own
    indicator styles are turned off (see base.html), so `'self'` is enough.
    """

    def __init__(self, get_response):
        self.get_response = get_response
        self.policy = getattr(settings, "CONTENT_SECURITY_POLICY", None) or DEFAULT_CSP

    def __call__(self, request):
        response = self.get_response(request)
        if self.policy and "Content-Security-Policy" not in response:
            response["Content-Security-Policy"] = self.policy
        return response


class RequestSizeLimitMiddleware:
    """Refuse a request whose body is larger than `AXIOM_MAX_UPLOAD_BYTES` with 413, before anything reads it.

    Django caps the form fields of a body (`DATA_UPLOAD_MAX_MEMORY_SIZE`) but not its files: a
    multipart upload (a portrait, a card, a save file) is streamed to a temporary file whole
    before any view can look at its size. The declared `Content-Length` is checked first,
    before the CSRF check or a view reads the body; the views' own limits (a 5 MB portrait, a
    16 MB save file) then say precisely what is too large.
    """

    def __init__(self, get_response):
        self.get_response = get_response
        self.limit = settings.AXIOM_MAX_UPLOAD_BYTES

    def __call__(self, request):
        try:
            declared = int(request.META.get("CONTENT_LENGTH") or 0)
        except ValueError:
            declared = 0
        if declared > self.limit:
            return HttpResponse(
                f"The request body is {declared} bytes; at most {self.limit} are accepted (AXIOM_MAX_UPLOAD_BYTES).\n",
                status=413,
                content_type="text/plain; charset=utf-8",
            )
        return self.get_response(request)

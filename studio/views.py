"""Project-level pages: the studio home, a health check and the /favicon.ico redirect."""

from django.contrib.auth.decorators import login_not_required
from django.db.models import Count
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.templatetags.static import static
from django.views.decorators.http import require_GET

from studio.world.models import Save
from studio.universes.selectors import universe_list_for_user


@require_GET
def home(request: HttpRequest) -> HttpResponse:
    universes = universe_list_for_user(user=request.user).annotate(
        lore_count=Count("lore_entries", distinct=True), save_count=Count("saves", distinct=True)
    )
    recent_saves = (
        Save.objects.filter(universe__in=universe_list_for_user(user=request.user))
        .select_related("universe")
        .order_by("-last_activity_at")[:8]
    )
    return render(request, "home.html", {"universes": universes, "recent_saves": recent_saves})


@require_GET
@login_not_required
def healthz(request: HttpRequest) -> JsonResponse:
    return JsonResponse({"status": "ok"})


@require_GET
@login_not_required
def favicon(request: HttpRequest) -> HttpResponse:
    """Send the browser's own /favicon.ico request to the static icon (pages also link it).

    Not permanent: the static URL may change (a hashed storage), and a cached 301 would not.
    """
    return redirect(static("favicon.ico"))

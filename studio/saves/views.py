"""Save pages."""
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.views.decorators.http import require_GET

from studio.saves.selectors import save_list_for_user


@require_GET
def save_list(request: HttpRequest) -> HttpResponse:
    return render(request, "saves/list.html", {"saves": save_list_for_user(user=request.user)})


@require_GET
def save_detail(request: HttpRequest, save_id: str) -> HttpResponse:
    save = get_object_or_404(save_list_for_user(user=request.user), save_id=save_id)
    events = save.events.order_by("turn_id")
    return render(request, "saves/detail.html", {"save": save, "events": events})

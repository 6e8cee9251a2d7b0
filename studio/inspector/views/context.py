"""The context viewer: what the narrator would receive for the next turn, and why."""
from __future__ import annotations

from django import forms
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from studio.memory.recall.context import DEFAULT_K_LORE, DEFAULT_K_NARRATIVE, DEFAULT_TOKEN_BUDGET, build_memory_context
from studio.roles import is_playtester
from studio.saves.views.access import visible_save
from studio.saves.views.saves import save_page_context


class ContextForm(forms.Form):
    q = forms.CharField(required=False, label="Next player input", widget=forms.Textarea(attrs={"rows": 2}))
    focus = forms.CharField(required=False, label="Focus terms", help_text="On-scene names and the place, comma separated.")
    budget = forms.IntegerField(required=False, min_value=10, max_value=32000, initial=DEFAULT_TOKEN_BUDGET, label="Token budget")
    k_narrative = forms.IntegerField(required=False, min_value=1, max_value=50, initial=DEFAULT_K_NARRATIVE, label="Narrative chunks")
    k_lore = forms.IntegerField(required=False, min_value=0, max_value=20, initial=DEFAULT_K_LORE, label="Lore entries")
    record = forms.BooleanField(required=False, label="Record for lore replay")


def _default_query(game_save) -> str:
    last = game_save.events.order_by("-turn_id").only("player_input", "narrative").first()
    if last is None:
        return ""
    return last.player_input or last.narrative[-300:]


@require_GET
def context_viewer(request: HttpRequest, save_id: str) -> HttpResponse:
    game_save = visible_save(request, save_id)
    data = request.GET.copy() if request.GET else None
    if data is not None and "q" not in data:
        data["q"] = _default_query(game_save)
    form = ContextForm(data, initial={"q": _default_query(game_save)})
    memory_context = None
    if form.is_bound and form.is_valid():
        cleaned = form.cleaned_data
        memory_context = build_memory_context(
            game_save=game_save,
            query_text=cleaned["q"] or "",
            focus_terms=[t for t in (cleaned["focus"] or "").split(",") if t.strip()],
            token_budget=cleaned["budget"] or DEFAULT_TOKEN_BUDGET,
            k_narrative=cleaned["k_narrative"] or DEFAULT_K_NARRATIVE,
            k_lore=DEFAULT_K_LORE if cleaned["k_lore"] is None else cleaned["k_lore"],
            record=bool(cleaned["record"]) and is_playtester(request.user),
        )
    context = save_page_context(request, game_save, "context")
    context.update({"form": form, "memory_context": memory_context})
    template = "memory/context.html#context-result" if request.htmx else "memory/context.html"
    return render(request, template, context)

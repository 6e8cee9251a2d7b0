"""Memory search playground: a query with its explain records, and "why not" for any chunk."""
from __future__ import annotations

import time

from django import forms
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from studio.memory.context import record_query
from studio.roles import is_playtester
from studio.saves.views.access import visible_save
from studio.saves.views.saves import save_page_context

ARMS = ("semantic", "lexical", "context", "turn")
CHUNK_FILTERS = [
    ("", "all chunks"),
    ("narrative_only", "narrative only (exclude lore)"),
    ("lore", "lore only"),
    ("narrative", "chunk type “narrative”"),
]


class PlaygroundForm(forms.Form):
    q = forms.CharField(max_length=2000, label="Query")
    k = forms.IntegerField(min_value=1, max_value=50, initial=5, required=False)
    horizon = forms.IntegerField(min_value=0, required=False, label="Turn horizon", help_text="Only chunks from turns up to this one (blank: the save's current turn).")
    focus = forms.CharField(required=False, label="Focus terms", help_text="Comma separated: on-scene names, the current place.")
    chunk = forms.ChoiceField(choices=CHUNK_FILTERS, required=False, label="Chunks")
    record = forms.BooleanField(required=False, label="Record for lore replay")

    def query_kwargs(self, game_save) -> dict:
        """Return the `VectorMemory.query` keyword arguments this form asks for."""
        data = self.cleaned_data
        kwargs = {
            "k": data.get("k") or 5,
            "current_turn_id": game_save.current_turn,
            "max_turn_id": data.get("horizon"),
            "focus_terms": [t.strip() for t in (data.get("focus") or "").split(",") if t.strip()] or None,
            "chunk_type": None,
            "exclude_chunk_type": None,
        }
        chunk = data.get("chunk") or ""
        if chunk == "narrative_only":
            kwargs["exclude_chunk_type"] = "lore"
        elif chunk:
            kwargs["chunk_type"] = chunk
        return kwargs


def _vector_memory():
    from studio.memory.vector import get_vector_memory

    return get_vector_memory()


@require_GET
def playground(request: HttpRequest, save_id: str) -> HttpResponse:
    game_save = visible_save(request, save_id)
    form = PlaygroundForm(request.GET or None, initial={"k": 5})
    results = None
    stats: dict = {}
    elapsed_ms = None
    recorded = None
    if form.is_bound and form.is_valid():
        kwargs = form.query_kwargs(game_save)
        started = time.perf_counter()
        outcome = _vector_memory().query_explained(game_save.save_id, form.cleaned_data["q"], **kwargs)
        elapsed_ms = round((time.perf_counter() - started) * 1000, 1)
        results = outcome.results
        stats = outcome.stats.as_dict()
        if form.cleaned_data.get("record") and is_playtester(request.user):
            params = {k: v for k, v in kwargs.items() if k in ("k", "focus_terms", "chunk_type", "exclude_chunk_type")}
            recorded = record_query(game_save=game_save, query_text=form.cleaned_data["q"], params={**params, "source": "playground"}, results=results)
    context = save_page_context(request, game_save, "playground")
    context.update({"form": form, "results": results, "stats": stats, "elapsed_ms": elapsed_ms, "recorded": recorded})
    template = "memory/playground.html#results" if request.htmx else "memory/playground.html"
    return render(request, template, context)


@require_GET
def why_not(request: HttpRequest, save_id: str) -> HttpResponse:
    """Where one chunk ranked in each arm for this query, and why it missed the top k."""
    game_save = visible_save(request, save_id)
    form = PlaygroundForm(request.GET)
    chunk_id = request.GET.get("chunk_id", "").strip()[:200]
    report = None
    error = ""
    if not chunk_id:
        error = "Give the id of a chunk."
    elif form.is_valid():
        kwargs = form.query_kwargs(game_save)
        report = _vector_memory().explain_chunk(game_save.save_id, form.cleaned_data["q"], chunk_id, **kwargs)
    else:
        error = "Give a query."
    context = save_page_context(request, game_save, "playground")
    arms = []
    if report and not report.get("filtered_out"):
        arms = [
            {"name": name, "rank": report["ranks"].get(name), "score": report["scores"].get(name)}
            for name in ARMS
        ]
    context.update({"form": form, "chunk_id": chunk_id, "report": report, "arms": arms, "error": error})
    template = "memory/playground.html#why-not" if request.htmx else "memory/why_not.html"
    return render(request, template, context)

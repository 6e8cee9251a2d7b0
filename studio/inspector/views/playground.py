"""Memory search playground: a query with its explain records, and "why not" for any chunk."""
from __future__ import annotations

from django import forms
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from studio.memory.recall.search import memory_explain_chunk, memory_search
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

    def search_kwargs(self) -> dict:
        """Return the `memory_search` keyword arguments this form asks for.

        The form's "horizon" is `max_turn_id`; the search itself never looks past the save's
        current turn (`memory_horizon`), so a horizon beyond it changes nothing.
        """
        data = self.cleaned_data
        kwargs = {
            "query_text": data["q"],
            "k": data.get("k") or 5,
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


def _asked_chunk_id(request: HttpRequest) -> str:
    """The chunk a "Why not?" link asks about (the timeline's links fill it in)."""
    return request.GET.get("chunk_id", "").strip()[:200]


def _query_string(request: HttpRequest) -> str:
    """The query's parameters without the asked chunk (each result row adds its own)."""
    query = request.GET.copy()
    query.pop("chunk_id", None)
    return query.urlencode()


def _why_not_context(game_save, form: PlaygroundForm, chunk_id: str) -> dict:
    """Return the why-not report of one chunk for the form's query, its arm rows and any error."""
    report = None
    error = ""
    if not chunk_id:
        error = "Give the id of a chunk."
    elif form.is_valid():
        report = memory_explain_chunk(game_save=game_save, chunk_id=chunk_id, **form.search_kwargs())
    else:
        error = "Give a query."
    arms = []
    if report and not report.get("filtered_out"):
        arms = [
            {"name": name, "rank": report["ranks"].get(name), "score": report["scores"].get(name)}
            for name in ARMS
        ]
    return {"chunk_id": chunk_id, "report": report, "arms": arms, "error": error}


@require_GET
def playground(request: HttpRequest, save_id: str) -> HttpResponse:
    game_save = visible_save(request, save_id)
    chunk_id = _asked_chunk_id(request)
    # A "Why not?" link brings only the chunk id: show the empty form, not "Query is required".
    form = PlaygroundForm(request.GET if "q" in request.GET else None, initial={"k": 5})
    results = None
    stats: dict = {}
    elapsed_ms = None
    recorded = None
    if form.is_bound and form.is_valid():
        record = bool(form.cleaned_data.get("record")) and is_playtester(request.user)
        outcome = memory_search(
            game_save=game_save, **form.search_kwargs(), record_source="playground" if record else None
        )
        results, stats, elapsed_ms, recorded = outcome.results, outcome.stats.as_dict(), outcome.elapsed_ms, outcome.recorded
    context = save_page_context(request, game_save, "playground")
    context.update({"form": form, "results": results, "stats": stats, "elapsed_ms": elapsed_ms, "recorded": recorded})
    context.update({"chunk_id": chunk_id, "query_string": _query_string(request)})
    if chunk_id and results is not None:  # asked from a turn, then searched: its ranks show with the results
        context.update(_why_not_context(game_save, form, chunk_id))
    template = "memory/playground.html#results" if request.htmx else "memory/playground.html"
    return render(request, template, context)


@require_GET
def why_not(request: HttpRequest, save_id: str) -> HttpResponse:
    """Where one chunk ranked in each arm for this query, and why it missed the top k."""
    game_save = visible_save(request, save_id)
    form = PlaygroundForm(request.GET)
    context = save_page_context(request, game_save, "playground")
    context.update({"form": form, "query_string": _query_string(request)})
    context.update(_why_not_context(game_save, form, _asked_chunk_id(request)))
    template = "memory/playground.html#why-not" if request.htmx else "memory/why_not.html"
    return render(request, template, context)

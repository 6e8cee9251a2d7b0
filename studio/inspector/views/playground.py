"""Memory search playground: a query with its explain records, and "why not" for any chunk.

A GET searches and writes nothing. "Record for lore replay" is a POST (CSRF, playtester
role) that runs the same search and stores it as a RecordedQuery; htmx gets the results
fragment back, a plain form a redirect to the GET of the same parameters.
"""

from __future__ import annotations

from urllib.parse import urlencode

from django import forms
from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from studio.memory.recall.query_params import DEFAULT_K, LIMITS, InvalidParameters, SearchParams
from studio.memory.recall.search import memory_explain_chunk, memory_search
from studio.saves.access import Access, save_for
from studio.saves.views.saves import save_page_context

ARMS = ("semantic", "lexical", "context", "turn")
TEMPORAL_ARM = "temporal"  # shown only when the query names a time (it runs for no other query)
CHUNK_FILTERS = [
    ("", "all chunks"),
    ("narrative_only", "narrative only (exclude lore)"),
    ("lore", "lore only"),
    ("narrative", "chunk type “narrative”"),
]


PARAMS = ("q", "k", "horizon", "focus", "chunk")
# The SearchParams fields and the form fields they come from.
FIELD_FOR = {"query_text": "q", "k": "k", "max_turn_id": "horizon", "focus_terms": "focus"}


class PlaygroundForm(forms.Form):
    q = forms.CharField(max_length=LIMITS.query_text_chars, label="Query")
    k = forms.IntegerField(min_value=LIMITS.k_min, max_value=LIMITS.k_max, initial=DEFAULT_K, required=False)
    horizon = forms.IntegerField(
        min_value=0,
        required=False,
        label="Turn horizon",
        help_text="Only chunks from turns up to this one (blank: the save's current turn).",
    )
    focus = forms.CharField(
        required=False, label="Focus terms", help_text="Comma separated: on-scene names, the current place."
    )
    chunk = forms.ChoiceField(choices=CHUNK_FILTERS, required=False, label="Chunks")

    def clean(self):
        cleaned = super().clean()
        if self.errors:
            return cleaned
        chunk = cleaned.get("chunk") or ""
        try:
            cleaned["params"] = SearchParams(
                query_text=cleaned["q"],
                k=cleaned.get("k") or DEFAULT_K,
                max_turn_id=cleaned.get("horizon"),
                focus_terms=cleaned.get("focus") or "",
                chunk_type=chunk if chunk and chunk != "narrative_only" else None,
                exclude_chunk_type="lore" if chunk == "narrative_only" else None,
            )
        except InvalidParameters as exc:
            for name, message in exc.errors.items():
                self.add_error(FIELD_FOR.get(name), message)
        return cleaned

    def search_kwargs(self) -> dict:
        """Return the `memory_search` keyword arguments this form asks for (its `SearchParams`).

        The form's "horizon" is `max_turn_id`; the search itself never looks past the save's
        current turn (`memory_horizon`), so a horizon beyond it changes nothing.
        """
        kwargs = self.cleaned_data["params"].search_kwargs()
        kwargs.pop("current_turn_id")
        return kwargs


def _asked_chunk_id(request: HttpRequest) -> str:
    """The chunk a "Why not?" link asks about (the timeline's links fill it in)."""
    return request.GET.get("chunk_id", "").strip()[:200]


def _query_string(request: HttpRequest) -> str:
    """The query's parameters without the asked chunk (each result row adds its own)."""
    query = (request.POST if request.method == "POST" else request.GET).copy()
    for name in ("chunk_id", "csrfmiddlewaretoken"):
        query.pop(name, None)
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
            for name in ARMS + ((TEMPORAL_ARM,) if TEMPORAL_ARM in report["ranks"] else ())
        ]
    return {"chunk_id": chunk_id, "report": report, "arms": arms, "error": error}


def _results_page(request: HttpRequest, game_save, form: PlaygroundForm, outcome=None) -> HttpResponse:
    chunk_id = _asked_chunk_id(request)
    context = save_page_context(request, game_save, "playground")
    context.update({"form": form, "results": None, "stats": {}, "elapsed_ms": None, "recorded": None})
    if outcome is not None:
        context.update(
            {
                "results": outcome.results,
                "stats": outcome.stats.as_dict(),
                "elapsed_ms": outcome.elapsed_ms,
                "recorded": outcome.recorded,
            }
        )
    context.update({"chunk_id": chunk_id, "query_string": _query_string(request)})
    if chunk_id and outcome is not None:  # asked from a turn, then searched: its ranks show with the results
        context.update(_why_not_context(game_save, form, chunk_id))
    template = "memory/playground.html#results" if request.htmx else "memory/playground.html"
    return render(request, template, context)


@require_GET
def playground(request: HttpRequest, save_id: str) -> HttpResponse:
    game_save = save_for(user=request.user, save_id=save_id)
    # A "Why not?" link brings only the chunk id: show the empty form, not "Query is required".
    form = PlaygroundForm(request.GET if "q" in request.GET else None, initial={"k": DEFAULT_K})
    outcome = None
    if form.is_bound and form.is_valid():
        outcome = memory_search(game_save=game_save, **form.search_kwargs())
    return _results_page(request, game_save, form, outcome)


@require_POST
def playground_record(request: HttpRequest, save_id: str) -> HttpResponse:
    """Run the posted search again and record it for Lore replay."""
    game_save = save_for(user=request.user, save_id=save_id, access=Access.PLAY)
    form = PlaygroundForm(request.POST)
    if not form.is_valid():
        return _results_page(request, game_save, form)
    outcome = memory_search(game_save=game_save, **form.search_kwargs(), record_source="playground")
    if not request.htmx:
        messages.success(request, "The search was recorded for lore replay.")
        query = urlencode({name: request.POST[name] for name in PARAMS if name in request.POST})
        return redirect(f"{reverse('memory:playground', args=[game_save.save_id])}?{query}")
    return _results_page(request, game_save, form, outcome)


@require_GET
def why_not(request: HttpRequest, save_id: str) -> HttpResponse:
    """Where one chunk ranked in each arm for this query, and why it missed the top k."""
    game_save = save_for(user=request.user, save_id=save_id)
    form = PlaygroundForm(request.GET)
    context = save_page_context(request, game_save, "playground")
    context.update({"form": form, "query_string": _query_string(request)})
    context.update(_why_not_context(game_save, form, _asked_chunk_id(request)))
    template = "memory/playground.html#why-not" if request.htmx else "memory/why_not.html"
    return render(request, template, context)

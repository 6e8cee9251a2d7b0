"""The context viewer: what the narrator would receive for the next turn, and why.

The GET assembles the context (`next_turn_context`, the narrator's own path, so the same
input shows the same items and the same text, the renderer's) and writes nothing. A point of
view naming no character the save knows is refused on the page, beside the field, with the
known characters named (the API answers the same 400). "Record for lore replay" is a POST (CSRF,
playtester role) that assembles the same context and stores its two queries; htmx gets the
result fragment back, a plain form a redirect to the GET of the same parameters.
"""

from __future__ import annotations

from urllib.parse import urlencode

from django import forms
from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from studio.memory.knowledge.names import character_index
from studio.memory.recall.context import default_focus, next_turn_context
from studio.memory.recall.policy import context_budget_from_meta
from studio.memory.recall.query_params import (
    DEFAULT_K_LORE,
    DEFAULT_K_NARRATIVE,
    DEFAULT_TOKEN_BUDGET,
    LIMITS,
    ContextParams,
    InvalidParameters,
)
from studio.saves.access import Access, save_for
from studio.saves.views.saves import save_page_context

PARAMS = ("q", "focus", "budget", "k_narrative", "k_lore", "pov")
# The form's fields and the ContextParams fields they fill.
FIELD_FOR = {
    "query_text": "q",
    "focus_terms": "focus",
    "token_budget": "budget",
    "k_narrative": "k_narrative",
    "k_lore": "k_lore",
    "pov": "pov",
}
NO_POV = {"none", "off", "-"}


class ContextForm(forms.Form):
    q = forms.CharField(
        required=False,
        max_length=LIMITS.query_text_chars,
        label="Next player input",
        widget=forms.Textarea(attrs={"rows": 2}),
    )
    focus = forms.CharField(
        required=False,
        label="Focus terms",
        help_text="On-scene names and the place, comma separated. Empty: the narrator's focus, the player character.",
    )
    budget = forms.IntegerField(
        required=False,
        min_value=LIMITS.token_budget_min,
        max_value=LIMITS.token_budget_max,
        initial=DEFAULT_TOKEN_BUDGET,
        label="Token budget",
    )
    k_narrative = forms.IntegerField(
        required=False,
        min_value=LIMITS.k_min,
        max_value=LIMITS.k_max,
        initial=DEFAULT_K_NARRATIVE,
        label="Narrative chunks",
    )
    k_lore = forms.IntegerField(
        required=False, min_value=LIMITS.k_min, max_value=LIMITS.k_max, initial=DEFAULT_K_LORE, label="Lore entries"
    )
    pov = forms.CharField(
        required=False,
        max_length=2000,
        label="Point of view",
        help_text="Characters whose knowledge the narrator is given, comma separated. Empty: "
        "those on scene (present, named in the input, in focus); “none”: no point of view.",
    )

    def __init__(self, *args, default_budget: int = DEFAULT_TOKEN_BUDGET, **kwargs):
        """`default_budget`: the budget when the field is left empty (the views give the narrator's)."""
        super().__init__(*args, **kwargs)
        self.default_budget = default_budget
        self.fields["budget"].initial = default_budget

    def clean(self):
        cleaned = super().clean()
        if self.errors:
            return cleaned
        try:
            cleaned["params"] = ContextParams(
                query_text=cleaned.get("q") or "",
                focus_terms=cleaned.get("focus") or "",
                token_budget=cleaned.get("budget") or self.default_budget,
                k_narrative=cleaned.get("k_narrative") or DEFAULT_K_NARRATIVE,
                k_lore=cleaned.get("k_lore") or DEFAULT_K_LORE,
                pov=_pov(cleaned.get("pov") or ""),
            )
        except InvalidParameters as exc:
            for name, message in exc.errors.items():
                self.add_error(FIELD_FOR.get(name), message)
        return cleaned


def _pov(value: str):
    """The form's point of view: None (those on scene), () (none) or the names given."""
    value = value.strip()
    if not value:
        return None
    if value.casefold() in NO_POV:
        return ()
    return tuple(name.strip() for name in value.split(",") if name.strip())


def _default_query(game_save) -> str:
    last = game_save.events.order_by("-turn_id").only("player_input", "narrative").first()
    if last is None:
        return ""
    return last.player_input or last.narrative[-300:]


def _page(request: HttpRequest, game_save, form: ContextForm, memory_context=None, recorded: int = 0) -> HttpResponse:
    context = save_page_context(request, game_save, "context")
    context.update(
        {
            "form": form,
            "memory_context": memory_context,
            "recorded": recorded,
            "default_focus": default_focus(game_save),
            "pov_choices": character_index(game_save.universe, save=game_save).all_characters(),
        }
    )
    template = "memory/context.html#context-result" if request.htmx else "memory/context.html"
    return render(request, template, context)


@require_GET
def context_viewer(request: HttpRequest, save_id: str) -> HttpResponse:
    game_save = save_for(user=request.user, save_id=save_id)
    default_query = _default_query(game_save)
    data = request.GET.copy() if request.GET else None
    if data is not None and "q" not in data:
        data["q"] = default_query
    universe_meta = game_save.universe.meta_values()  # read once: the form's default budget and the context
    form = ContextForm(data, initial={"q": default_query}, default_budget=context_budget_from_meta(universe_meta))
    memory_context = None
    if form.is_bound and form.is_valid():
        memory_context = _assembled(form, game_save=game_save, universe_meta=universe_meta)
    return _page(request, game_save, form, memory_context)


def _assembled(form: ContextForm, *, game_save, universe_meta, record_source: str | None = None):
    """The context for the form's parameters, or None with the form's errors (a point of view no character answers to)."""
    try:
        return next_turn_context(
            game_save=game_save,
            params=form.cleaned_data["params"],
            universe_meta=universe_meta,
            record_source=record_source,
        )
    except InvalidParameters as exc:
        for name, message in exc.errors.items():
            form.add_error(FIELD_FOR.get(name), message)
        return None


@require_POST
def context_record(request: HttpRequest, save_id: str) -> HttpResponse:
    """Assemble the context for the posted parameters and record its queries for Lore replay."""
    game_save = save_for(user=request.user, save_id=save_id, access=Access.PLAY)
    universe_meta = game_save.universe.meta_values()  # read once: the form's default budget and the context
    form = ContextForm(request.POST, default_budget=context_budget_from_meta(universe_meta))
    if not form.is_valid():
        return _page(request, game_save, form)
    memory_context = _assembled(form, game_save=game_save, universe_meta=universe_meta, record_source="context")
    if memory_context is None:
        return _page(request, game_save, form)
    recorded = len(memory_context.queries)
    if not request.htmx:
        messages.success(request, f"Recorded {recorded} memory queries for lore replay.")
        query = urlencode({name: request.POST[name] for name in PARAMS if name in request.POST})
        return redirect(f"{reverse('memory:context', args=[game_save.save_id])}?{query}")
    return _page(request, game_save, form, memory_context, recorded=recorded)

"""Saves list, create, and the playtest console (append a turn)."""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from studio.memory.chapters.selectors import open_chapter
from studio.roles import is_playtester
from studio.saves.forms import SaveCreateForm, TurnAppendForm, default_save_name
from studio.world.models import Save
from studio.saves.narrator.selectors import llm_connected, narrator_panel_context
from studio.saves.selectors import (
    STORY_TURNS,
    STORY_TURNS_MAX,
    STORY_TURNS_MORE,
    recent_events,
    save_list_with_counts,
    story_turns,
    turn_lore_line,
)
from studio.saves.access import Access, may, require, save_for
from studio.universes.selectors import universe_list_for_user


def save_page_context(request: HttpRequest, game_save: Save, tab: str) -> dict:
    """Return what every page of a save shows in its header and tabs."""
    return {"save": game_save, "tab": tab, "can_playtest": is_playtester(request.user)}


@require_GET
def save_list(request: HttpRequest) -> HttpResponse:
    universes = universe_list_for_user(user=request.user).order_by("name")
    universe = None
    slug = request.GET.get("universe", "").strip()
    if slug:
        universe = universes.filter(slug=slug).first()
    saves = save_list_with_counts(user=request.user, universe=universe)
    context = {
        "saves": saves,
        "universes": universes,
        "universe": universe,
        "can_playtest": is_playtester(request.user),
    }
    template = "saves/list.html#save-table" if request.htmx else "saves/list.html"
    return render(request, template, context)


def _chosen_universe(universes, value: str):
    """The universe a create form names: by slug (a universe's New save link) or by pk (its select)."""
    value = (value or "").strip()
    if not value:
        return None
    found = universes.filter(slug=value).first()
    if found is None and value.isdigit():
        found = universes.filter(pk=int(value)).first()
    return found


def _create_form(request: HttpRequest, universes, universe, data=None, files=None, initial=None) -> SaveCreateForm:
    """The new-save form for `universe`: its persona (editable by its authors) and its opening's greetings."""
    from studio.saves.narrator.opening import universe_greetings
    from studio.universes.services import persona_of

    greetings = universe_greetings(universe=universe)[1] if universe is not None else []
    form = SaveCreateForm(
        data,
        files,
        universes=universes,
        llm_connected=llm_connected(),
        greetings=greetings,
        persona=persona_of(universe=universe) if universe is not None else None,
        edit_persona=universe is not None and may(request.user, Access.EDIT),
        initial=initial or {},
    )
    # Choosing another universe shows its persona and opening (htmx); without JavaScript, the Show button.
    form.fields["universe"].widget.attrs.update(
        {
            "hx-get": reverse("saves:create"),
            "hx-trigger": "change",
            "hx-target": "#create-form",
            "hx-swap": "outerHTML",
            "hx-include": "#create-form [name=name]",
        }
    )
    return form


@require_http_methods(["GET", "POST"])
def save_create(request: HttpRequest) -> HttpResponse:
    """The new-save form: universe, name, memory mode; the universe's persona and the opening to start from.

    A GET with `?universe=` (slug or pk) shows that universe's persona and greetings (the select
    asks for them again with htmx when it changes; without JavaScript, "Show its persona and
    opening"). Creating writes the persona when an author changed it, the save, and turn 1 from
    the chosen greeting (`opening.opening_accept`), then opens the Console.
    """
    require(request.user, Access.PLAY)
    universes = universe_list_for_user(user=request.user).order_by("name")
    if request.method == "POST" and "preview" not in request.POST:
        universe = _chosen_universe(universes, request.POST.get("universe", ""))
        form = _create_form(request, universes, universe, request.POST, request.FILES)
        if form.is_valid():
            game_save = _create_from(request, form)
            if game_save is not None:
                return redirect("saves:detail", save_id=game_save.save_id)
    else:
        values = request.POST if request.method == "POST" else request.GET
        universe = _chosen_universe(universes, values.get("universe", ""))
        initial = {}
        if universe is not None:  # from the universe's New save: one click more to play
            initial.update(universe=universe, name=values.get("name") or default_save_name(universe))
        form = _create_form(request, universes, universe, initial=initial)
    template = "saves/create.html#create-form" if request.htmx else "saves/create.html"
    return render(request, template, {"form": form, "universe": universe, "persona": _persona_shown(universe)})


def _persona_shown(universe):
    from studio.universes.services import persona_of

    return persona_of(universe=universe) if universe is not None else None


def _create_from(request: HttpRequest, form: SaveCreateForm):
    """Write what a valid form asks for; return the save, or None with the problem added to the form."""
    from django.core.exceptions import ValidationError

    from studio.saves.narrator.opening import opening_accept
    from studio.saves.narrator.play import PlayError
    from studio.saves.services import save_create as create
    from studio.universes.services import persona_of, persona_set

    data = form.cleaned_data
    universe = data["universe"]
    if "persona_name" in form.fields:
        current = persona_of(universe=universe)
        portrait = data.get("persona_portrait")
        changed = (data["persona_name"].strip(), data["persona_description"].strip()) != (
            current.name,
            current.description,
        )
        if changed or portrait is not None:
            try:
                persona_set(
                    universe=universe,
                    name=data["persona_name"],
                    description=data["persona_description"],
                    portrait=portrait.read() if portrait is not None else None,
                )
            except ValidationError as exc:
                for name, problems in exc.message_dict.items():
                    form.add_error(f"persona_{name}" if f"persona_{name}" in form.fields else None, problems)
                return None
    game_save = create(
        universe=universe, name=data["name"], memory_mode=data["memory_mode"], beliefs_enabled=data["beliefs_enabled"]
    )
    messages.success(request, f"Save “{game_save.name}” created.")
    if data.get("opening"):
        try:
            opening_accept(game_save=game_save, number=int(data["opening"]))
        except PlayError as exc:
            messages.error(request, f"The opening was not appended: {exc}")
        else:
            messages.info(request, f"Turn 1 is greeting {data['opening']} of the opening.")
    return game_save


def console_chapter(game_save: Save) -> dict:
    """What the Console's chapter card shows: the open chapter's number and first turn."""
    number, open_start = open_chapter(game_save)
    return {"number": number, "open_start": open_start}


def story_limit(request: HttpRequest) -> int:
    """How many turns the story view shows: `?turns=N` (the "Show earlier turns" link), else STORY_TURNS."""
    value = (request.GET.get("turns") or request.POST.get("turns") or "").strip()
    return min(int(value), STORY_TURNS_MAX) if value.isdigit() and int(value) > 0 else STORY_TURNS


def _console_context(request: HttpRequest, game_save: Save, form: TurnAppendForm | None = None) -> dict:
    from studio.saves.narrator.play import last_turn_swipes

    context = save_page_context(request, game_save, "console")
    # The open chapter and its Close button (the card's own partial, console.html#chapter).
    context["chapter"] = console_chapter(game_save)
    limit = story_limit(request)
    story = story_turns(game_save=game_save, limit=limit, open_start=context["chapter"]["open_start"])
    earlier = story[0].event.turn_id - 1 if story else 0
    context.update(
        {
            "form": form or TurnAppendForm(),
            "story": story,
            "recent": [item.event for item in story],
            "earlier_turns": earlier,
            "more_turns": min(limit + STORY_TURNS_MORE, STORY_TURNS_MAX) if earlier else None,
            "story_limit": limit,
            "swipes": last_turn_swipes(game_save=game_save, event=story[-1].event if story else None),
            "lore_line": turn_lore_line(game_save=game_save) if story else None,
        }
    )
    # The narrator panel (its own partial, saves/narrator/panel.html).
    context.update(narrator_panel_context(game_save=game_save))
    # An action handed back by Undo or written by Impersonate (no-JavaScript path: kept in the session).
    context["action_text"] = request.session.pop("console_action_text", "")
    if context["action_text"]:
        context["action_mode"] = "story"  # already a whole action: not shaped again
        if form is None:  # without a model, the hand-written turn's form takes it
            context["form"] = TurnAppendForm(initial={"player_input": context["action_text"]})
    return context


console_context = _console_context  # the narrator's accept answers the same console


@require_GET
def save_detail(request: HttpRequest, save_id: str) -> HttpResponse:
    """The playtest console: the last turns, the append form and the save's jobs."""
    game_save = save_for(user=request.user, save_id=save_id)
    template = "saves/console.html#console" if request.htmx else "saves/console.html"
    return render(request, template, _console_context(request, game_save))


def _expected_turn_id(request: HttpRequest) -> int | None:
    """The turn id the console's form was made for (None from an older page or a script)."""
    value = request.POST.get("expected_turn_id", "").strip()
    return int(value) if value.isdigit() else None


def _sent_twice(game_save: Save, data: dict) -> bool:
    """True when the save's latest turn is the one this form submits (a double submit)."""
    latest = recent_events(game_save=game_save, limit=1)
    return bool(latest) and (latest[0].player_input, latest[0].narrative) == (data["player_input"], data["narrative"])


@require_POST
def turn_append(request: HttpRequest, save_id: str) -> HttpResponse:
    """Append the next turn; the form carries the turn it was made for, so a double submit
    (or someone else's append since the page was loaded) appends nothing the second time."""
    game_save = save_for(user=request.user, save_id=save_id, access=Access.PLAY)
    form = TurnAppendForm(request.POST)
    if form.is_valid():
        from studio.saves.services import PendingVectorCleanupError, TurnConflict
        from studio.saves.services import turn_append as append

        try:
            event = append(
                game_save=game_save,
                player_input=form.cleaned_data["player_input"],
                narrative=form.cleaned_data["narrative"],
                expected_turn_id=_expected_turn_id(request),
            )
        except PendingVectorCleanupError as exc:
            form.add_error(None, str(exc))  # nothing was written; the form keeps the text
        except TurnConflict as exc:
            game_save.refresh_from_db()
            if _sent_twice(game_save, form.cleaned_data):
                note = (
                    f"Turn {game_save.current_turn} was already appended with this text (the form was sent "
                    "twice); it was not appended again."
                )
                if not request.htmx:
                    messages.info(request, note)
                    return redirect("saves:detail", save_id=game_save.save_id)
                context = _console_context(request, game_save)
                context["notice"] = note
                return render(request, "saves/console.html#console", context)
            # Someone else appended since the page was loaded: keep the text, show their turn.
            form.add_error(
                None,
                f"{exc.message} The save moved on since this page was loaded; nothing was appended. "
                "Read the latest turns, then append again if you still want to.",
            )
        else:
            game_save.refresh_from_db()
            if not request.htmx:
                messages.success(request, f"Turn {event.turn_id} appended.")
                return redirect("saves:detail", save_id=game_save.save_id)
            context = _console_context(request, game_save)
            context["appended"] = event
            return render(request, "saves/console.html#console", context)
    # Errors answer 200 so htmx swaps the form with its messages in (it ignores 4xx bodies).
    template = "saves/console.html#console" if request.htmx else "saves/console.html"
    return render(request, template, _console_context(request, game_save, form))

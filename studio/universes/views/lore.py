"""The Lore Book: list and search, inline create/edit/delete, bulk actions, history."""

from __future__ import annotations

from urllib.parse import urlencode

from django.contrib import messages
from django.core.exceptions import ValidationError
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.template.loader import render_to_string
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from django_htmx.http import HttpResponseClientRedirect, HttpResponseStopPolling, retarget, reswap

from studio.universes import lore_merge, services
from studio.universes.activation import NAMES as ACTIVATION_NAMES
from studio.universes.activation import activation_display, invalid_regex_keys
from studio.memory.embeddings.counting import EMBEDDING_MAX_TOKENS, token_method
from studio.universes.forms import BulkActionForm, LoreEntryForm, LoreFilterForm
from studio.universes.models import LoreRevision
from studio.world.models import EmbeddingState, LoreEntry, LoreKind
from studio.universes.selectors import (
    fill_missing_counts,
    lore_book_totals,
    lore_deleted_entries,
    lore_embedding_states,
    lore_entry_get,
    lore_entry_search,
    lore_pending_count,
    lore_revisions_for,
    lore_rows,
    lore_semantic_search,
)
from studio.universes.access import Access, universe_for
from studio.universes.views.common import universe_context
from studio.universes.views.interchange import selection_export_response

PAGE_SIZE = 50
FILTER_FIELDS = ("q", "mode", "kind", "sort")


def _filters(data) -> dict[str, str]:
    form = LoreFilterForm(data)
    form.is_valid()
    cleaned = {name: form.cleaned_data.get(name) or "" for name in FILTER_FIELDS}
    cleaned["mode"] = cleaned["mode"] or "text"
    cleaned["sort"] = cleaned["sort"] or "title"
    return cleaned


def _list_context(request: HttpRequest, universe, filters: dict[str, str], page_number=None) -> dict:
    semantic_note = ""
    page_obj = None
    entries: list[LoreEntry] | None = None
    if filters["q"] and filters["mode"] == "semantic":
        result = lore_semantic_search(universe=universe, q=filters["q"], kind=filters["kind"])
        if result.error:
            semantic_note = f"{result.error} Showing text matches instead."
        else:
            entries = result.entries
            if not entries:
                semantic_note = (
                    "No entry is close in meaning yet; entries are searchable by meaning once they show “embedded”."
                )
    if entries is None:
        qs = lore_entry_search(universe=universe, q=filters["q"], kind=filters["kind"], sort=filters["sort"])
        if filters["q"]:
            # A text search scans every text; scan once for the matching ids (which also
            # gives the count) instead of once to count and again for the page.
            page_obj = Paginator(list(qs.values_list("pk", flat=True)), PAGE_SIZE).get_page(page_number)
            by_pk = {e.pk: e for e in lore_rows(universe.lore_entries.filter(pk__in=page_obj.object_list))}
            entries = [by_pk[pk] for pk in page_obj.object_list if pk in by_pk]
        else:
            page_obj = Paginator(lore_rows(qs), PAGE_SIZE).get_page(page_number)
            entries = list(page_obj.object_list)
    fill_missing_counts(entries)
    query = {
        k: v
        for k, v in filters.items()
        if v and not (k == "mode" and v == "text") and not (k == "sort" and v == "title")
    }
    return {
        **universe_context(request, universe, "lore"),
        "entries": entries,
        "page_obj": page_obj,
        "filters": filters,
        "filter_form": LoreFilterForm(initial=filters, data=filters),
        "querystring": urlencode(query),
        "semantic_note": semantic_note,
        "semantic_mode": page_obj is None,
        "totals": lore_book_totals(universe=universe),
        "pending": lore_pending_count(universe=universe),
        "token_method": token_method(),
        "max_tokens": EMBEDDING_MAX_TOKENS,
        "kinds": LoreKind.choices,
        "create_form": LoreEntryForm(universe=universe, prefix="new"),
        "export_formats": BulkActionForm.EXPORT_FORMATS,
    }


@require_GET
def lore_list(request: HttpRequest, slug: str) -> HttpResponse:
    universe = universe_for(user=request.user, slug=slug)
    context = _list_context(request, universe, _filters(request.GET), request.GET.get("page"))
    template = "universes/lore_list.html#results" if request.htmx else "universes/lore_list.html"
    return render(request, template, context)


def _row_context(request, universe, entry) -> dict:
    fill_missing_counts([entry])
    return {
        **universe_context(request, universe, "lore"),
        "entry": entry,
        "max_tokens": EMBEDDING_MAX_TOKENS,
        "totals": lore_book_totals(universe=universe),
        "pending": lore_pending_count(universe=universe),
        "oob": True,
    }


def _linked_pks(entry: LoreEntry) -> set[int]:
    """The entries whose row shows this one (as a link or a backlink count)."""
    return set(entry.links.values_list("pk", flat=True)) | set(entry.backlinks.values_list("pk", flat=True))


def _neighbour_rows(universe, pks: set[int]) -> list[LoreEntry]:
    """The rows to swap out of band after a delete or restore changed their links or backlink counts."""
    entries = list(lore_rows(universe.lore_entries.filter(pk__in=pks)).order_by("pk")) if pks else []
    fill_missing_counts(entries)
    return entries


def _reload(universe, entry_id: str) -> LoreEntry:
    return lore_entry_get(universe=universe, entry_id=entry_id)


@require_http_methods(["GET", "POST"])
def lore_create(request: HttpRequest, slug: str) -> HttpResponse:
    universe = universe_for(user=request.user, slug=slug, access=Access.EDIT)
    # ?title= prefills the title (Lore health's "write it" for a pending link).
    initial = {"title": request.GET.get("title", "")[:300]} if request.method == "GET" else {}
    form = LoreEntryForm(request.POST or None, universe=universe, prefix="new", initial=initial)
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        try:
            entry = services.lore_entry_create(
                universe=universe,
                user=request.user,
                title=data["title"],
                kind=data["kind"],
                text=data["text"],
                keys=data["keys"],
                links=data["links"],
                entry_id=data["entry_id"],
                activation=data.get("activation"),
                known_by=data.get("known_by_value"),
                pending_links=data["pending_links"],
            )
        except ValidationError as exc:
            form.add_error(None, exc)
        else:
            if request.htmx:
                created = _reload(universe, entry.entry_id)
                context = _row_context(request, universe, created)
                context["create_form"] = LoreEntryForm(universe=universe, prefix="new")
                context["created"] = True
                context["neighbours"] = _neighbour_rows(universe, _linked_pks(created))
                return render(request, "universes/lore_list.html#created", context)
            messages.success(request, f"Added “{entry.title}”.")
            return redirect(entry.get_absolute_url())
    context = {**universe_context(request, universe, "lore"), "form": form, "create_form": form}
    if request.htmx:
        response = render(request, "universes/lore_list.html#create-form", context)
        return reswap(retarget(response, "#lore-create"), "outerHTML")
    return render(request, "universes/lore_form.html", context, status=400 if form.is_bound else 200)


@require_GET
def lore_detail(request: HttpRequest, slug: str, entry_id: str) -> HttpResponse:
    universe = universe_for(user=request.user, slug=slug)
    entry = lore_entry_get(universe=universe, entry_id=entry_id)
    fill_missing_counts([entry])
    context = {
        **universe_context(request, universe, "lore"),
        "entry": entry,
        "activation_sections": activation_display(entry),
        "invalid_keys": invalid_regex_keys(entry),
        "max_tokens": EMBEDDING_MAX_TOKENS,
        "token_method": token_method(),
        "pending": lore_pending_count(universe=universe),
        "revision_count": universe.lore_revisions.filter(entry_id=entry.entry_id).count(),
    }
    return render(request, "universes/lore_detail.html", context)


@require_GET
def lore_row(request: HttpRequest, slug: str, entry_id: str) -> HttpResponse:
    """The entry's row in the Lore Book table (what an inline edit's Cancel puts back)."""
    universe = universe_for(user=request.user, slug=slug)
    if not request.htmx:
        return redirect("universes:lore_detail", slug=slug, entry_id=entry_id)
    entry = lore_entry_get(universe=universe, entry_id=entry_id)
    context = _row_context(request, universe, entry)
    context["oob"] = False
    return render(request, "universes/lore_list.html#row", context)


@require_http_methods(["GET", "POST"])
def lore_edit(request: HttpRequest, slug: str, entry_id: str) -> HttpResponse:
    universe = universe_for(user=request.user, slug=slug, access=Access.EDIT)
    entry = lore_entry_get(universe=universe, entry_id=entry_id)
    form = LoreEntryForm(request.POST or None, universe=universe, entry=entry, auto_id=f"id_edit{entry.pk}_%s")
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        linked_before = _linked_pks(entry)
        try:
            services.lore_entry_update(
                entry=entry,
                user=request.user,
                title=data["title"],
                kind=data["kind"],
                text=data["text"],
                keys=data["keys"],
                links=data["links"],
                activation=data.get("activation"),
                base_version=data.get("base_version"),
                pending_links=data["pending_links"],
                **({"known_by": data["known_by_value"]} if "known_by_value" in data else {}),
            )
        except services.LoreEditConflict as conflict:
            return _conflict_response(request, universe, conflict)
        except ValidationError as exc:
            form.add_error(None, exc)
        else:
            if request.htmx:
                saved = _reload(universe, entry_id)
                context = _row_context(request, universe, saved)
                context["neighbours"] = _neighbour_rows(universe, linked_before ^ _linked_pks(saved))
                return render(request, "universes/lore_list.html#saved-row", context)
            messages.success(request, f"Saved “{entry.title}”.")
            return redirect(entry.get_absolute_url())
    context = {**universe_context(request, universe, "lore"), "entry": entry, "form": form}
    if request.htmx:
        return render(request, "universes/lore_list.html#edit-row", context)
    return render(request, "universes/lore_form.html", context, status=400 if form.is_bound else 200)


def _conflict_response(request: HttpRequest, universe, conflict) -> HttpResponse:
    """Both versions, their diff and the three ways out (keep theirs / overwrite / save a merge).

    The full page answers 409; the inline editor's fragment answers 200 (htmx does not swap
    an error response) and replaces the editor's row.
    """
    theirs, mine = conflict.theirs, conflict.mine
    carried = [
        (name, value)
        for name, values in request.POST.lists()
        for value in values
        if name not in ("csrfmiddlewaretoken", "base_version", "text")
    ]
    context = {
        **universe_context(request, universe, "lore"),
        "entry": conflict.entry,
        "conflict": conflict,
        "theirs_text": theirs.get("text", ""),
        "mine_text": mine.get("text", ""),
        "diff": lore_merge.diff_lines(theirs.get("text", ""), mine.get("text", "")),
        "merged_text": lore_merge.merge_texts(theirs.get("text", ""), mine.get("text", "")),
        "differences": lore_merge.field_differences(theirs, mine),
        "carried": carried,
        "carried_editable": {"title", "keys"},
        "inline": bool(request.htmx) and "activation_shown" not in request.POST,
    }
    if request.htmx:
        return render(
            request,
            "universes/lore_conflict.html#conflict-row"
            if context["inline"]
            else "universes/lore_conflict.html#conflict",
            context,
        )
    return render(request, "universes/lore_conflict.html", context, status=409)


@require_http_methods(["GET", "POST"])
def lore_delete(request: HttpRequest, slug: str, entry_id: str) -> HttpResponse:
    universe = universe_for(user=request.user, slug=slug, access=Access.EDIT)
    entry = lore_entry_get(universe=universe, entry_id=entry_id)
    if request.method == "POST":
        title = entry.title
        neighbour_pks = _linked_pks(entry)
        services.lore_entry_delete(entry=entry, user=request.user)
        if request.htmx:
            revision = (
                universe.lore_revisions.filter(entry_id=entry_id, action=LoreRevision.Action.DELETE)
                .order_by("-pk")
                .first()
            )
            context = {
                **universe_context(request, universe, "lore"),
                "oob": True,
                "totals": lore_book_totals(universe=universe),
                "deleted_title": title,
                "deleted_revision": revision,
                "deleted_entry_id": entry_id,
                "neighbours": _neighbour_rows(universe, neighbour_pks),
            }
            return render(request, "universes/lore_list.html#deleted", context)
        messages.success(request, f"Deleted “{title}”. Its history keeps it: restore it from “Deleted entries”.")
        return redirect("universes:lore_list", slug=universe.slug)
    context = {**universe_context(request, universe, "lore"), "entry": entry}
    return render(request, "universes/lore_delete.html", context)


@require_POST
def lore_bulk(request: HttpRequest, slug: str) -> HttpResponse:
    universe = universe_for(user=request.user, slug=slug, access=Access.EDIT)
    form = BulkActionForm(request.POST, universe=universe)
    filters = _filters(request.POST)
    if not form.is_valid():
        errors = "; ".join(e for errs in form.errors.values() for e in errs)
        if request.htmx:
            context = _list_context(request, universe, filters, request.POST.get("page"))
            context["bulk_error"] = errors
            return render(request, "universes/lore_list.html#results", context)
        messages.error(request, errors)
        return redirect(_list_url(universe, filters))
    action, entry_ids = form.cleaned_data["action"], form.cleaned_data["entries"]
    if action == "export":
        entries = universe.lore_entries.filter(entry_id__in=entry_ids)
        return selection_export_response(universe, entries, form.cleaned_data["export_format"] or "toml")
    if action == "delete":
        count = services.lore_bulk_delete(universe=universe, user=request.user, entry_ids=entry_ids)
        note = f"Deleted {count} entr{'y' if count == 1 else 'ies'}; each can be restored from “Deleted entries”."
    elif action in BulkActionForm.ACTIVATION_ACTIONS:
        count = services.lore_bulk_set_activation(
            universe=universe, user=request.user, entry_ids=entry_ids, values=BulkActionForm.ACTIVATION_ACTIONS[action]
        )
        label = dict(BulkActionForm.ACTIONS)[action]
        note = f"{label}: {count} entr{'y' if count == 1 else 'ies'} changed."
    else:
        kind = form.cleaned_data["new_kind"]
        count = services.lore_bulk_set_kind(universe=universe, user=request.user, entry_ids=entry_ids, kind=kind)
        note = f"Changed {count} entr{'y' if count == 1 else 'ies'} to {LoreKind(kind).label}."
    if request.htmx:
        context = _list_context(request, universe, filters, request.POST.get("page"))
        context["bulk_note"] = note
        return render(request, "universes/lore_list.html#results", context)
    messages.success(request, note)
    return redirect(_list_url(universe, filters))


def _list_url(universe, filters) -> str:
    query = urlencode({k: v for k, v in filters.items() if v})
    return reverse("universes:lore_list", kwargs={"slug": universe.slug}) + (f"?{query}" if query else "")


@require_GET
def lore_status(request: HttpRequest, slug: str) -> HttpResponse:
    """Embedding states. htmx: badge updates for the listed rows; once nothing is pending the
    fragment comes with 286 (`HttpResponseStopPolling`), which stops the polling."""
    universe = universe_for(user=request.user, slug=slug)
    pending = lore_pending_count(universe=universe)
    if request.htmx:
        pks = [int(p) for p in request.GET.getlist("ids") if p.strip().isdigit()][:500]
        context = {
            **universe_context(request, universe, "lore"),
            "pending": pending,
            "states": lore_embedding_states(universe=universe, pks=pks),
        }
        if not pending:
            return HttpResponseStopPolling(
                render_to_string("universes/lore_list.html#status", context, request=request)
            )
        return render(request, "universes/lore_list.html#status", context)
    failed = universe.lore_entries.filter(embedding_state=EmbeddingState.FAILED).only(
        "entry_id", "title", "embedding_error"
    )
    counts = {state: universe.lore_entries.filter(embedding_state=state).count() for state in EmbeddingState.values}
    context = {**universe_context(request, universe, "lore"), "pending": pending, "failed": failed, "counts": counts}
    return render(request, "universes/lore_status.html", context)


def _who_knows(state: dict) -> str:
    """The `known_by` a revision recorded, as the entry page says it ("" when none was recorded)."""
    if not state:
        return ""
    value = state.get("known_by")
    if value is None:
        return "everyone"
    return f"only {', '.join(value)}" if value else "nobody but the narrator"


def _revision_changes(revision: LoreRevision) -> list[tuple[str, object, object]]:
    before, after = revision.before or {}, revision.after or {}
    names = ["title", "kind", "keys", "links", "text", *ACTIVATION_NAMES, "extensions"]
    secrecy = ("known_by", _who_knows(before), _who_knows(after))
    if not before or not after:
        state = after or before
        changes = [
            (name, before.get(name, ""), after.get(name, ""))
            for name in names
            if state.get(name) not in ("", [], {}, None)
        ]
        return changes + ([secrecy] if state.get("known_by") is not None else [])
    changes = [(name, before.get(name), after.get(name)) for name in names if before.get(name) != after.get(name)]
    return changes + ([secrecy] if before.get("known_by") != after.get("known_by") else [])


@require_GET
def lore_history(request: HttpRequest, slug: str, entry_id: str) -> HttpResponse:
    universe = universe_for(user=request.user, slug=slug)
    revisions = list(lore_revisions_for(universe=universe, entry_id=entry_id)[:200])
    entry = universe.lore_entries.filter(entry_id=entry_id).first()
    if entry is None and not revisions:
        raise Http404("No such lore entry.")
    for revision in revisions:
        revision.changes = _revision_changes(revision)
    context = {
        **universe_context(request, universe, "lore"),
        "entry": entry,
        "entry_id": entry_id,
        "revisions": revisions,
        "title": entry.title if entry else (revisions[0].before or {}).get("title", entry_id),
    }
    template = "universes/lore_history.html#revisions" if request.htmx else "universes/lore_history.html"
    return render(request, template, context)


@require_POST
def lore_restore(request: HttpRequest, slug: str, entry_id: str, revision_id: int) -> HttpResponse:
    universe = universe_for(user=request.user, slug=slug, access=Access.EDIT)
    revision = get_object_or_404(universe.lore_revisions, pk=revision_id, entry_id=entry_id)
    try:
        entry = services.lore_entry_restore(revision=revision, user=request.user)
    except ValidationError as exc:
        messages.error(request, "; ".join(exc.messages))
        return redirect("universes:lore_history", slug=slug, entry_id=entry_id)
    if request.htmx and request.POST.get("inline"):
        # Undo of an inline delete in the Lore Book: the row comes back in place, with the
        # rows it links to or from (their backlink counts) and the totals swapped out of band.
        entry = _reload(universe, entry.entry_id)
        context = _row_context(request, universe, entry)
        context.update(oob=False, neighbours=_neighbour_rows(universe, _linked_pks(entry)), restored=True)
        return render(request, "universes/lore_list.html#restored", context)
    messages.success(request, f"Restored “{entry.title}” as of {revision.created_at:%Y-%m-%d %H:%M:%S}.")
    if request.htmx:
        return HttpResponseClientRedirect(entry.get_absolute_url())
    return redirect(entry.get_absolute_url())


@require_GET
def lore_deleted(request: HttpRequest, slug: str) -> HttpResponse:
    universe = universe_for(user=request.user, slug=slug)
    context = {**universe_context(request, universe, "lore"), "deleted": lore_deleted_entries(universe=universe)}
    return render(request, "universes/lore_deleted.html", context)

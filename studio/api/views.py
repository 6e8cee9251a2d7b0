"""The engine's JSON API, version 1 (see docs/api.md and `openapi.json`).

Every view is wrapped by `api_view`, which authenticates (bearer token or session), checks
the method and CSRF, and turns errors into {"error": {...}} JSON. Views stay thin: they
validate parameters, check access (`studio.saves.access`: its NotFound and RoleRequired
become 404 `not_found` / 403 `permission_denied` in `faults.py`), call the services and selectors
the studio pages use, and serialize.
"""
from __future__ import annotations

from django.http import HttpRequest, JsonResponse

from studio.api import serializers
from studio.api.errors import ApiError, conflict, not_found, validation_error
from studio.api.http import Params, api_view, json_body, page, page_params
from studio.api.openapi import build_openapi
from studio.memory import selectors as memory_selectors
from studio.memory.observations import TRENDS
from studio.memory.recall.query_params import (
    DEFAULT_K,
    DEFAULT_K_LORE,
    DEFAULT_K_NARRATIVE,
    DEFAULT_TOKEN_BUDGET,
    LIMITS,
    ContextParams,
    InvalidParameters,
    SearchParams,
)
from studio.memory.recall.search import memory_horizon, memory_search
from studio.memory.selectors import belief_list_at_turn, fact_list_at_turn, mental_model_list_at_turn
from studio.roles import is_author, is_playtester
from studio.saves.access import Access, require, save_for, universe_for
from studio.saves.models import Event, MemoryMode, Save, StateCache
from studio.saves.selectors import save_list_for_user
from studio.universes.selectors import universe_list_for_user


def _created(body: dict) -> JsonResponse:
    return JsonResponse(body, status=201)


# -- about the caller and the API ----------------------------------------------------------


@api_view("GET")
def openapi_document(request: HttpRequest) -> JsonResponse:
    return JsonResponse(build_openapi(server_url=request.build_absolute_uri("/api/v1")))


@api_view("GET")
def me(request: HttpRequest) -> JsonResponse:
    user = request.user
    token = request.api_token
    return JsonResponse(
        {
            "username": user.get_username(),
            "roles": {
                "staff": bool(user.is_staff),
                "author": is_author(user),
                "playtester": is_playtester(user),
            },
            "authenticated_by": "token" if token is not None else "session",
            "token": serializers.token_json(token) if token is not None else None,
        }
    )


# -- universes and saves -------------------------------------------------------------------


@api_view("GET")
def universe_list(request: HttpRequest) -> JsonResponse:
    params, limit, offset = page_params(request)
    params.done()
    rows = list(universe_list_for_user(user=request.user).order_by("name", "pk")[offset : offset + limit + 1])
    return JsonResponse(page([serializers.universe_json(u) for u in rows], limit=limit, offset=offset))


@api_view("GET", "POST")
def save_collection(request: HttpRequest) -> JsonResponse:
    if request.method == "POST":
        return _save_create(request)
    params, limit, offset = page_params(request)
    universe_slug = params.string("universe", max_length=80)
    params.done()
    qs = save_list_for_user(user=request.user).select_related("forked_from")
    if universe_slug:
        qs = qs.filter(universe__slug=universe_slug)
    rows = list(qs.order_by("-last_activity_at", "-pk")[offset : offset + limit + 1])
    return JsonResponse(page([serializers.save_json(s) for s in rows], limit=limit, offset=offset))


def _save_create(request: HttpRequest) -> JsonResponse:
    from studio.saves.services import save_create

    data = json_body(request)
    params = Params(data)
    universe_slug = params.string("universe", required=True, max_length=80, allow_blank=False)
    name = params.string("name", required=True, max_length=200, allow_blank=False)
    memory_mode = params.string("memory_mode", default=MemoryMode.CLASSIC, choices=list(MemoryMode.values))
    beliefs_enabled = params.boolean("beliefs_enabled", default=True)
    params.done()
    universe = universe_for(user=request.user, slug=universe_slug, access=Access.PLAY)
    save = save_create(universe=universe, name=name.strip(), memory_mode=memory_mode, beliefs_enabled=beliefs_enabled)
    return _created(serializers.save_json(save))


@api_view("GET")
def save_detail(request: HttpRequest, save_id: str) -> JsonResponse:
    return JsonResponse(serializers.save_json(save_for(user=request.user, save_id=save_id)))


# -- turns ---------------------------------------------------------------------------------


@api_view("GET", "POST")
def turn_collection(request: HttpRequest, save_id: str) -> JsonResponse:
    if request.method == "POST":
        return _turn_append(request, save_id)
    save = save_for(user=request.user, save_id=save_id)
    params, limit, offset = page_params(request)
    since = params.integer("after_turn", minimum=0)
    include_state = params.boolean("include_state", default=False)
    params.done()
    events = Event.objects.filter(game_save=save).order_by("turn_id")
    if since is not None:
        events = events.filter(turn_id__gt=since)
    rows = list(events[offset : offset + limit + 1])
    states = {}
    if include_state and rows:
        states = dict(
            StateCache.objects.filter(game_save=save, turn_id__in=[e.turn_id for e in rows]).values_list("turn_id", "state")
        )
    items = [serializers.event_json(e, states.get(e.turn_id) if include_state else None) for e in rows]
    return JsonResponse(page(items, limit=limit, offset=offset))


def _turn_append(request: HttpRequest, save_id: str) -> JsonResponse:
    from studio.saves.services import TurnConflict, turn_append

    save = save_for(user=request.user, save_id=save_id, access=Access.PLAY)
    data = json_body(request)
    params = Params(data)
    player_input = params.string("player_input", default="", max_length=20_000)
    narrative = params.string("narrative", required=True, max_length=200_000)
    state = params.json_object("state")
    turn_id = params.integer("turn_id", minimum=1)
    params.done()
    # No transaction here: the service finishes a pending vector delete first (outside the
    # database) and checks the expected turn under the save's lock (two engines appending
    # at once: one gets its turn, the other a 409).
    try:
        event = turn_append(
            game_save=save, player_input=player_input, narrative=narrative, state=state, expected_turn_id=turn_id
        )
    except TurnConflict as exc:
        raise conflict(exc.message, {"current_turn": exc.current_turn}) from exc
    save.refresh_from_db()
    return _created({"turn": serializers.event_json(event, state or {}), "save": serializers.save_json(save)})


def _event_for(save: Save, turn_id: int) -> Event:
    event = Event.objects.filter(game_save=save, turn_id=turn_id).first()
    if event is None:
        raise not_found("turn")
    return event


@api_view("GET", "PATCH")
def turn_detail(request: HttpRequest, save_id: str, turn_id: int) -> JsonResponse:
    if request.method == "PATCH":
        return _turn_update(request, save_id, turn_id)
    save = save_for(user=request.user, save_id=save_id)
    event = _event_for(save, turn_id)
    state = StateCache.objects.filter(game_save=save, turn_id=turn_id).values_list("state", flat=True).first()
    return JsonResponse(serializers.event_json(event, state if state is not None else {}))


def _turn_update(request: HttpRequest, save_id: str, turn_id: int) -> JsonResponse:
    from studio.saves.services import turn_update_narrative

    save = save_for(user=request.user, save_id=save_id, access=Access.PLAY)
    params = Params(json_body(request))
    narrative = params.string("narrative", required=True, max_length=200_000)
    params.done()
    _event_for(save, turn_id)
    event = turn_update_narrative(game_save=save, turn_id=turn_id, narrative=narrative)
    return JsonResponse(serializers.event_json(event))


# -- living memory reads -------------------------------------------------------------------


def _horizon(params: Params, save: Save) -> int:
    """Read `max_turn_id`, clamped to the save's current turn (absent: the current turn)."""
    return memory_horizon(game_save=save, turn_id=params.integer("max_turn_id", minimum=0))


@api_view("GET")
def fact_list(request: HttpRequest, save_id: str) -> JsonResponse:
    save = save_for(user=request.user, save_id=save_id)
    params, limit, offset = page_params(request)
    horizon = _horizon(params, save)
    entity = params.string("entity", max_length=200)
    params.done()
    facts = fact_list_at_turn(game_save=save, horizon=horizon, entity=entity, offset=offset, limit=limit + 1)
    return JsonResponse(page([serializers.fact_json(f) for f in facts], limit=limit, offset=offset))


@api_view("GET")
def belief_list(request: HttpRequest, save_id: str) -> JsonResponse:
    save = save_for(user=request.user, save_id=save_id)
    params, limit, offset = page_params(request)
    horizon = _horizon(params, save)
    subject = params.string("subject", max_length=200)
    trend = params.string("trend", choices=list(TRENDS))
    stale = params.boolean("stale")
    params.done()
    beliefs = belief_list_at_turn(
        game_save=save, horizon=horizon, subject=subject, trend=trend, stale=stale, offset=offset, limit=limit + 1
    )
    items = [serializers.belief_json(b, horizon) for b in beliefs]
    return JsonResponse(page(items, limit=limit, offset=offset) | {"now_turn": horizon})


@api_view("GET")
def mental_model_list(request: HttpRequest, save_id: str) -> JsonResponse:
    save = save_for(user=request.user, save_id=save_id)
    params, limit, offset = page_params(request)
    horizon = _horizon(params, save)
    subject = params.string("subject", max_length=200)
    params.done()
    models = mental_model_list_at_turn(game_save=save, horizon=horizon, subject=subject, offset=offset, limit=limit + 1)
    return JsonResponse(page([serializers.mental_model_json(m) for m in models], limit=limit, offset=offset))


# -- memory query and the assembled context ------------------------------------------------


def _read_params(request: HttpRequest) -> Params:
    """Parameters from the query string (GET) or the JSON body (POST)."""
    if request.method == "POST":
        return Params(json_body(request))
    return Params(request.GET, from_query=True)


def _json(body: dict, status: int = 200) -> JsonResponse:
    return JsonResponse(body, status=status, encoder=serializers.ApiJSONEncoder)


def _parameters(request: HttpRequest, params: Params, build) -> tuple:
    """Return (`build()`, record): the SearchParams / ContextParams and whether to record.

    One 400 lists every invalid field, `record` on a GET among them (recording writes, so it
    is a POST); then recording needs the playtester role (403).
    """
    record = bool(params.boolean("record", default=False))
    errors = {name: list(messages) for name, messages in params.errors.items()}
    if record and request.method != "POST":
        errors["record"] = ["Recording writes: send the request as a POST."]
    built = None
    try:
        built = build()
    except InvalidParameters as exc:
        for name, message in exc.errors.items():
            errors.setdefault(name, [message])
    if errors:
        raise validation_error(errors)
    if record:
        require(request.user, Access.PLAY)
    return built, record


@api_view("GET", "POST")
def memory_query(request: HttpRequest, save_id: str) -> JsonResponse:
    """Run VectorMemory.query on the save with every engine parameter; return results with explain records.

    A vector store that cannot be reached is a 503 (see faults.py); an embedding model that
    cannot load leaves the lexical arms, and the answer says so in `warnings`. The limits
    are `SearchParams`'s, the ones the search playground has.
    """
    save = save_for(user=request.user, save_id=save_id)
    params = _read_params(request)
    query_text = params.string("query_text", required=True)
    k = params.integer("k", default=DEFAULT_K)
    current_turn_id = params.integer("current_turn_id")
    max_turn_id = params.integer("max_turn_id")
    focus_terms = params.string_list("focus_terms", max_items=LIMITS.focus_terms, max_length=LIMITS.focus_term_chars)
    chunk_type = params.string("chunk_type")
    exclude_chunk_type = params.string("exclude_chunk_type")
    expand_links = params.boolean("expand_links", default=False)
    search, record = _parameters(request, params, lambda: SearchParams(
        query_text=query_text or "", k=k, current_turn_id=current_turn_id, max_turn_id=max_turn_id,
        focus_terms=focus_terms, chunk_type=chunk_type, exclude_chunk_type=exclude_chunk_type,
        expand_links=bool(expand_links),
    ))
    # memory_search clamps the horizon to the save's current turn: a chunk a failed rewind
    # left behind (turn > current) never comes back, whatever the client asks.
    outcome = memory_search(
        game_save=save, **search.search_kwargs(), expand_links=search.expand_links,
        record_source="api" if record else None,
    )
    return _json(
        {
            "save_id": save.save_id,
            "query_text": search.query_text,
            "current_turn_id": outcome.current_turn_id,
            "results": [serializers.chunk_result_json(r) for r in outcome.results],
            "warnings": _query_warnings(outcome.stats),
            "stats": outcome.stats.as_dict(),
        }
    )


def _query_warnings(stats) -> list[str]:
    """Say which retrieval arms were missing, so a degraded answer is never silent."""
    warnings = []
    if stats.vector_store_error:
        warnings.append(
            "The vector store is unreachable: results come from the lexical arms over the last "
            f"cached corpus ({stats.vector_store_error})."
        )
    elif not stats.semantic_available:
        warnings.append("The semantic arm was unavailable (no embedding model): results come from the lexical arms only.")
    if not stats.lexical_available:
        warnings.append("The lexical (BM25) arm was unavailable: results come from the semantic arm only.")
    return warnings


@api_view("GET", "POST")
def memory_context(request: HttpRequest, save_id: str) -> JsonResponse:
    """Return the memory context for the save's next turn: what the narrator reads (`next_turn_context`)."""
    from studio.memory.recall.context import next_turn_context

    save = save_for(user=request.user, save_id=save_id)
    params = _read_params(request)
    query_text = params.string("query_text", default="")
    focus_terms = params.string_list("focus_terms", max_items=LIMITS.focus_terms, max_length=LIMITS.focus_term_chars)
    token_budget = params.integer("token_budget", default=DEFAULT_TOKEN_BUDGET)
    k_narrative = params.integer("k_narrative", default=DEFAULT_K_NARRATIVE)
    k_lore = params.integer("k_lore", default=DEFAULT_K_LORE)
    context_params, record = _parameters(request, params, lambda: ContextParams(
        query_text=query_text, focus_terms=focus_terms, token_budget=token_budget, k_narrative=k_narrative,
        k_lore=k_lore,
    ))
    context = next_turn_context(game_save=save, params=context_params, record_source="context" if record else None)
    return _json(context.as_dict())


# -- rewind and fork -----------------------------------------------------------------------


def _target_turn(params: Params, save: Save, *, name: str = "turn_id", required: bool = True) -> int | None:
    turn = params.integer(name, required=required, minimum=0)
    params.done()
    if turn is not None and turn > save.current_turn:
        raise conflict(
            f"Save {save.save_id} is only at turn {save.current_turn}; turn {turn} is in its future.",
            {"current_turn": save.current_turn},
        )
    return turn


@api_view("GET")
def rewind_preview(request: HttpRequest, save_id: str) -> JsonResponse:
    save = save_for(user=request.user, save_id=save_id)
    turn = _target_turn(Params(request.GET, from_query=True), save)
    from studio.saves.checkpoints import CheckpointManager

    preview = CheckpointManager().preview(save, turn)
    return JsonResponse(serializers.rewind_preview_json(preview, save.current_turn))


@api_view("POST")
def rewind(request: HttpRequest, save_id: str) -> JsonResponse:
    from studio.saves.checkpoints import CheckpointManager, TurnConflict

    save = save_for(user=request.user, save_id=save_id, access=Access.PLAY)
    params = Params(json_body(request))
    expected = params.integer("expected_current_turn", minimum=0)
    turn = _target_turn(params, save)
    try:
        result = CheckpointManager().rewind(save, turn, expected_current_turn=expected)
    except TurnConflict as exc:
        raise conflict(exc.message, {"current_turn": exc.current_turn}) from exc
    save.refresh_from_db()
    return JsonResponse(serializers.rewind_result_json(result) | {"save": serializers.save_json(save)})


@api_view("POST")
def fork(request: HttpRequest, save_id: str) -> JsonResponse:
    save = save_for(user=request.user, save_id=save_id, access=Access.PLAY)
    params = Params(json_body(request))
    name = params.string("name", max_length=200)
    turn = _target_turn(params, save, required=False)
    from studio.saves.checkpoints import CheckpointManager

    new_save = CheckpointManager().fork(save, save.current_turn if turn is None else turn, name=name)
    new_save = Save.objects.select_related("universe", "forked_from").get(pk=new_save.pk)
    return _created(serializers.save_json(new_save))


# -- background jobs -----------------------------------------------------------------------

def _job_for(save: Save, job_id: int):
    job = memory_selectors.job_get(game_save=save, job_id=job_id)
    if job is None:
        raise not_found("job")
    return job


@api_view("GET")
def job_list(request: HttpRequest, save_id: str) -> JsonResponse:
    from studio.memory.models import JobKind, JobStatus

    save = save_for(user=request.user, save_id=save_id)
    params, limit, offset = page_params(request)
    status = params.string("status", choices=list(JobStatus.values))
    kind = params.string("kind", choices=list(JobKind.values))
    turn_id = params.integer("turn_id", minimum=0)
    params.done()
    jobs = memory_selectors.job_list(game_save=save, status=status, kind=kind, turn_id=turn_id)
    rows = list(jobs[offset : offset + limit + 1])
    return JsonResponse(page([serializers.job_json(j) for j in rows], limit=limit, offset=offset))


@api_view("GET")
def job_detail(request: HttpRequest, save_id: str, job_id: int) -> JsonResponse:
    save = save_for(user=request.user, save_id=save_id)
    return JsonResponse(serializers.job_json(_job_for(save, job_id)))


@api_view("POST")
def job_retry(request: HttpRequest, save_id: str, job_id: int) -> JsonResponse:
    from studio.memory.jobs import JobNotRetryable
    from studio.memory.jobs import job_retry as retry

    save = save_for(user=request.user, save_id=save_id, access=Access.PLAY)
    try:
        job = retry(job=_job_for(save, job_id))
    except JobNotRetryable as exc:
        raise conflict(str(exc), {"status": exc.job.status}) from exc
    return JsonResponse(serializers.job_json(job))


@api_view("POST")
def jobs_retry_skipped(request: HttpRequest, save_id: str) -> JsonResponse:
    """Retry the save's skipped memory jobs of turns still on its live timeline."""
    from studio.memory.jobs import jobs_retry_skipped as retry_skipped

    save = save_for(user=request.user, save_id=save_id, access=Access.PLAY)
    return JsonResponse(retry_skipped(game_save=save))


# -- anything else under /api/ -------------------------------------------------------------


@api_view("GET", "POST", "PUT", "PATCH", "DELETE")
def unknown_endpoint(request: HttpRequest, rest: str = "") -> JsonResponse:
    raise ApiError(404, "not_found", f"No API endpoint at {request.path}.")


# -- the narrator --------------------------------------------------------------------------


@api_view("POST")
def narrate(request: HttpRequest, save_id: str) -> JsonResponse:
    """Return a proposed narrative for `player_input` as the next turn; append nothing."""
    from studio.memory.llm import LLMError, SpendLimitExceeded
    from studio.saves.narrator.services import NoModelConnected, narrate_once

    save = save_for(user=request.user, save_id=save_id, access=Access.PLAY)
    params = Params(json_body(request))
    player_input = params.string("player_input", required=True, max_length=4000)
    params.done()
    try:
        narration = narrate_once(game_save=save, player_input=player_input)
    except NoModelConnected as exc:
        raise ApiError(503, "no_model", str(exc)) from exc
    except SpendLimitExceeded as exc:
        raise ApiError(429, "spend_limit", exc.reason, {"resume_at": exc.resume_at.isoformat()}) from exc
    except LLMError as exc:
        raise ApiError(502, "llm_failed", f"The narrator's model failed: {exc}") from exc
    response = narration.response
    return _json(
        {
            "save_id": save.save_id,
            "turn_id": narration.prompt.turn_id,
            "player_input": player_input,
            "narrative": narration.text,
            "appended": False,
            "model": response.model,
            "finish_reason": response.finish_reason,
            "truncated": response.truncated,
            "latency_ms": response.latency_ms,
            "prompt_tokens": response.prompt_tokens,
            "completion_tokens": response.completion_tokens,
            "prompt": {"system": narration.prompt.system, "user": narration.prompt.user, "chars": narration.prompt.chars},
            "context": narration.prompt.context_record(),
        }
    )

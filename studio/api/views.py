"""The engine's JSON API, version 1 (see docs/api.md and `openapi.json`).

Every endpoint registers on the django-ninja `router` with its typed parameters
(`studio.api.schemas`) and responses; `ninja_api.api_urlpatterns` wraps each URL with the
authentication, method and CSRF checks and turns errors into {"error": {...}} JSON. Views stay
thin: django-ninja has validated their parameters; they check access (`studio.saves.access`: its NotFound and RoleRequired
become 404 `not_found` / 403 `permission_denied` in `faults.py`), call the services and selectors
the studio pages use, and serialize.
"""

from __future__ import annotations

from django.db.models import Prefetch
from django.http import HttpRequest, JsonResponse

from ninja import Query

from studio.api import schemas as S
from studio.api import serializers
from studio.api.errors import conflict, not_found, validation_error
from studio.api.http import page
from studio.api.ninja_api import router
from studio.memory import selectors as memory_selectors

from studio.roles import is_author, is_playtester
from studio.saves.access import Access, save_for, universe_for
from studio.world.models import Event, Save, StateCache, UniverseMeta
from studio.saves.selectors import save_list_for_user
from studio.universes.selectors import universe_list_for_user


READ_ERRORS = {400: S.Error, 401: S.Error, 404: S.Error, 503: S.Error}
WRITE_ERRORS = {**READ_ERRORS, 403: S.Error, 409: S.Error, 413: S.Error, 415: S.Error}
SAVE = "/saves/{str:save_id}"


def _json(body: dict, status: int = 200) -> JsonResponse:
    return JsonResponse(body, status=status, encoder=serializers.ApiJSONEncoder)


def _created(body: dict) -> JsonResponse:
    return JsonResponse(body, status=201)


# -- about the caller and the API ----------------------------------------------------------


@router.get(
    "/me",
    response={200: S.Me, 401: S.Error},
    url_name="me",
    tags=["Meta"],
    operation_id="getMe",
    summary="Who the credentials belong to, and their roles.",
)
def me(request: HttpRequest):
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


@router.get(
    "/universes",
    response={200: S.UniversePage, 400: S.Error, 401: S.Error},
    url_name="universe_list",
    tags=["Universes"],
    operation_id="listUniverses",
    summary="Universes you own or are a member of (staff: all).",
)
def universe_list(request: HttpRequest, params: Query[S.PageQuery]):
    limit, offset = params.limit, params.offset
    persona_meta = Prefetch("meta", queryset=UniverseMeta.objects.filter(key__in=serializers.PERSONA_META_KEYS))
    rows = list(
        universe_list_for_user(user=request.user)
        .order_by("name", "pk")
        .prefetch_related(persona_meta)[offset : offset + limit + 1]
    )
    return JsonResponse(page([serializers.universe_json(u) for u in rows], limit=limit, offset=offset))


@router.get(
    "/saves",
    response={200: S.SavePage, 400: S.Error, 401: S.Error},
    url_name="save_collection",
    tags=["Saves"],
    operation_id="listSaves",
    summary="Saves of the universes you may see, most recently played first.",
)
def save_list(request: HttpRequest, params: Query[S.SaveListQuery]):
    limit, offset = params.limit, params.offset
    qs = save_list_for_user(user=request.user).select_related("forked_from")
    if params.universe:
        qs = qs.filter(universe__slug=params.universe)
    rows = list(qs.order_by("-last_activity_at", "-pk")[offset : offset + limit + 1])
    return JsonResponse(page([serializers.save_json(s) for s in rows], limit=limit, offset=offset))


@router.post(
    "/saves",
    response={201: S.Save, **WRITE_ERRORS},
    tags=["Saves"],
    operation_id="createSave",
    summary="Start a new save (playthrough) of a universe; its meta is copied at creation.",
)
def save_create(request: HttpRequest, payload: S.SaveCreate):
    from studio.saves.services import save_create

    universe = universe_for(user=request.user, slug=payload.universe, access=Access.PLAY)
    save = save_create(
        universe=universe,
        name=payload.name.strip(),
        memory_mode=payload.memory_mode,
        beliefs_enabled=payload.beliefs_enabled,
    )
    return _created(serializers.save_json(save))


@router.get(
    SAVE,
    response={200: S.Save, **READ_ERRORS},
    url_name="save_detail",
    tags=["Saves"],
    operation_id="getSave",
    summary="One save.",
)
def save_detail(request: HttpRequest, save_id: str):
    return JsonResponse(serializers.save_json(save_for(user=request.user, save_id=save_id)))


# -- turns ---------------------------------------------------------------------------------


@router.get(
    SAVE + "/turns",
    response={200: S.TurnPage, **READ_ERRORS},
    url_name="turn_collection",
    tags=["Saves"],
    operation_id="listTurns",
    summary="The save's turns, oldest first.",
)
def turn_list(request: HttpRequest, save_id: str, params: Query[S.TurnListQuery]):
    save = save_for(user=request.user, save_id=save_id)
    limit, offset = params.limit, params.offset
    events = Event.objects.filter(game_save=save).order_by("turn_id")
    if params.after_turn is not None:
        events = events.filter(turn_id__gt=params.after_turn)
    rows = list(events[offset : offset + limit + 1])
    states = {}
    if params.include_state and rows:
        states = dict(
            StateCache.objects.filter(game_save=save, turn_id__in=[e.turn_id for e in rows]).values_list(
                "turn_id", "state"
            )
        )
    items = [serializers.event_json(e, states.get(e.turn_id) if params.include_state else None) for e in rows]
    return JsonResponse(page(items, limit=limit, offset=offset))


@router.post(
    SAVE + "/turns",
    response={201: S.TurnAppended, **WRITE_ERRORS},
    tags=["Saves"],
    operation_id="appendTurn",
    summary="Append the next turn (player input, narrative, state); memory jobs are queued.",
)
def turn_append(request: HttpRequest, save_id: str, payload: S.TurnAppend):
    from studio.saves.services import TurnConflict, turn_append

    save = save_for(user=request.user, save_id=save_id, access=Access.PLAY)
    # No transaction here: the service finishes a pending vector delete first (outside the
    # database) and checks the expected turn under the save's lock (two engines appending
    # at once: one gets its turn, the other a 409).
    try:
        event = turn_append(
            game_save=save,
            player_input=payload.player_input,
            narrative=payload.narrative,
            state=payload.state,
            expected_turn_id=payload.turn_id,
        )
    except TurnConflict as exc:
        raise conflict(exc.message, {"current_turn": exc.current_turn}) from exc
    except ValueError as exc:  # the state's `present` / `reveals` (docs/knowledge.md): nothing was written
        raise validation_error({"state": [str(exc)]}, f"The turn's state is not valid: {exc}") from exc
    save.refresh_from_db()
    return _created({"turn": serializers.event_json(event, payload.state or {}), "save": serializers.save_json(save)})


def _event_for(save: Save, turn_id: int) -> Event:
    event = Event.objects.filter(game_save=save, turn_id=turn_id).first()
    if event is None:
        raise not_found("turn")
    return event


@router.get(
    SAVE + "/turns/{int:turn_id}",
    response={200: S.Turn, **READ_ERRORS},
    url_name="turn_detail",
    tags=["Saves"],
    operation_id="getTurn",
    summary="One turn, with its state.",
)
def turn_detail(request: HttpRequest, save_id: str, turn_id: int):
    save = save_for(user=request.user, save_id=save_id)
    event = _event_for(save, turn_id)
    state = StateCache.objects.filter(game_save=save, turn_id=turn_id).values_list("state", flat=True).first()
    return JsonResponse(serializers.event_json(event, state if state is not None else {}))


@router.patch(
    SAVE + "/turns/{int:turn_id}",
    response={200: S.Turn, **WRITE_ERRORS},
    tags=["Saves"],
    operation_id="updateTurn",
    summary="Replace a turn's narrative (its memory is rebuilt).",
)
def turn_update(request: HttpRequest, save_id: str, turn_id: int, payload: S.TurnUpdate):
    from studio.saves.services import turn_update_narrative

    save = save_for(user=request.user, save_id=save_id, access=Access.PLAY)
    _event_for(save, turn_id)
    event = turn_update_narrative(game_save=save, turn_id=turn_id, narrative=payload.narrative)
    return JsonResponse(serializers.event_json(event))


# -- living memory reads -------------------------------------------------------------------


def _check_target(save: Save, turn: int | None) -> int | None:
    if turn is not None and turn > save.current_turn:
        raise conflict(
            f"Save {save.save_id} is only at turn {save.current_turn}; turn {turn} is in its future.",
            {"current_turn": save.current_turn},
        )
    return turn


@router.get(
    SAVE + "/rewind-preview",
    response={200: S.RewindPreview, **READ_ERRORS, 409: S.Error},
    url_name="rewind_preview",
    tags=["Saves"],
    operation_id="previewRewind",
    summary="What a rewind to turn_id would delete and restore; changes nothing.",
)
def rewind_preview(request: HttpRequest, save_id: str, params: Query[S.RewindPreviewQuery]):
    from studio.saves.checkpoints import CheckpointManager

    save = save_for(user=request.user, save_id=save_id)
    turn = _check_target(save, params.turn_id)
    preview = CheckpointManager().preview(save, turn)
    return JsonResponse(serializers.rewind_preview_json(preview, save.current_turn))


@router.post(
    SAVE + "/rewind",
    response={200: S.RewindResult, **WRITE_ERRORS},
    url_name="rewind",
    tags=["Saves"],
    operation_id="rewindSave",
    summary="Rewind the save to the end of turn_id, exactly (one transaction).",
)
def rewind(request: HttpRequest, save_id: str, payload: S.RewindRequest):
    from studio.saves.checkpoints import CheckpointManager, TurnConflict

    save = save_for(user=request.user, save_id=save_id, access=Access.PLAY)
    turn = _check_target(save, payload.turn_id)
    try:
        result = CheckpointManager().rewind(save, turn, expected_current_turn=payload.expected_current_turn)
    except TurnConflict as exc:
        raise conflict(exc.message, {"current_turn": exc.current_turn}) from exc
    save.refresh_from_db()
    return JsonResponse(serializers.rewind_result_json(result) | {"save": serializers.save_json(save)})


@router.post(
    SAVE + "/fork",
    response={201: S.Save, **WRITE_ERRORS},
    url_name="fork",
    tags=["Saves"],
    operation_id="forkSave",
    summary="Copy the save as of turn_id (default: now) into a new save.",
)
def fork(request: HttpRequest, save_id: str, payload: S.ForkRequest):
    from studio.saves.checkpoints import CheckpointManager

    save = save_for(user=request.user, save_id=save_id, access=Access.PLAY)
    turn = _check_target(save, payload.turn_id)
    new_save = CheckpointManager().fork(save, save.current_turn if turn is None else turn, name=payload.name)
    new_save = Save.objects.select_related("universe", "forked_from").get(pk=new_save.pk)
    return _created(serializers.save_json(new_save))


# -- background jobs -----------------------------------------------------------------------


def _job_for(save: Save, job_id: int):
    job = memory_selectors.job_get(game_save=save, job_id=job_id)
    if job is None:
        raise not_found("job")
    return job


@router.get(
    SAVE + "/jobs",
    response={200: S.JobPage, **READ_ERRORS},
    url_name="job_list",
    tags=["Jobs"],
    operation_id="listJobs",
    summary="The save's background memory jobs, newest first.",
)
def job_list(request: HttpRequest, save_id: str, params: Query[S.JobQuery]):
    save = save_for(user=request.user, save_id=save_id)
    limit, offset = params.limit, params.offset
    jobs = memory_selectors.job_list(game_save=save, status=params.status, kind=params.kind, turn_id=params.turn_id)
    rows = list(jobs[offset : offset + limit + 1])
    return JsonResponse(page([serializers.job_json(j) for j in rows], limit=limit, offset=offset))


@router.get(
    SAVE + "/jobs/{int:job_id}",
    response={200: S.Job, **READ_ERRORS},
    url_name="job_detail",
    tags=["Jobs"],
    operation_id="getJob",
    summary="One job.",
)
def job_detail(request: HttpRequest, save_id: str, job_id: int):
    save = save_for(user=request.user, save_id=save_id)
    return JsonResponse(serializers.job_json(_job_for(save, job_id)))


@router.post(
    SAVE + "/jobs/{int:job_id}/retry",
    response={200: S.Job, **WRITE_ERRORS},
    url_name="job_retry",
    tags=["Jobs"],
    operation_id="retryJob",
    summary="Queue a failed or skipped job again (409 otherwise).",
)
def job_retry(request: HttpRequest, save_id: str, job_id: int):
    from studio.memory.jobs import JobNotRetryable
    from studio.memory.jobs import job_retry as retry

    save = save_for(user=request.user, save_id=save_id, access=Access.PLAY)
    try:
        job = retry(job=_job_for(save, job_id))
    except JobNotRetryable as exc:
        raise conflict(str(exc), {"status": exc.job.status}) from exc
    return JsonResponse(serializers.job_json(job))


@router.post(
    SAVE + "/jobs/retry-skipped",
    response={200: S.RetrySkipped, **WRITE_ERRORS},
    url_name="jobs_retry_skipped",
    tags=["Jobs"],
    operation_id="retrySkippedJobs",
    summary="Retry the save's skipped memory jobs of turns still on its live timeline.",
)
def jobs_retry_skipped(request: HttpRequest, save_id: str):
    from studio.memory.jobs import jobs_retry_skipped as retry_skipped

    save = save_for(user=request.user, save_id=save_id, access=Access.PLAY)
    return JsonResponse(retry_skipped(game_save=save))

"""The JSON API's memory reads: a save's facts, beliefs and mental models at a turn, a memory query,
and the memory context the narrator reads (the same pipeline, layout and text as the narrator's
prompt: `studio.memory.recall`). See docs/api.md.
"""

from __future__ import annotations

from django.http import HttpRequest, JsonResponse

from ninja import Query

from studio.api import schemas as S
from studio.api import serializers
from studio.api.errors import validation_error
from studio.api.http import page
from studio.api.ninja_api import router
from studio.api.views import READ_ERRORS, SAVE, WRITE_ERRORS, _json
from studio.memory.recall.query_params import ContextParams, InvalidParameters, SearchParams
from studio.memory.recall.search import memory_horizon, memory_search
from studio.memory.selectors import belief_list_at_turn, fact_list_at_turn, mental_model_list_at_turn
from studio.saves.access import Access, require, save_for
from studio.world.models import Save


def _horizon(params, save: Save) -> int:
    """`max_turn_id`, clamped to the save's current turn (absent: the current turn)."""
    return memory_horizon(game_save=save, turn_id=params.max_turn_id)


@router.get(
    SAVE + "/facts",
    response={200: S.FactPage, **READ_ERRORS},
    url_name="fact_list",
    tags=["Memory"],
    operation_id="listFacts",
    summary="Facts extracted up to the horizon, newest first.",
)
def fact_list(request: HttpRequest, save_id: str, params: Query[S.FactQuery]):
    save = save_for(user=request.user, save_id=save_id)
    limit, offset = params.limit, params.offset
    facts = fact_list_at_turn(
        game_save=save, horizon=_horizon(params, save), entity=params.entity, offset=offset, limit=limit + 1
    )
    return JsonResponse(page([serializers.fact_json(f) for f in facts], limit=limit, offset=offset))


@router.get(
    SAVE + "/beliefs",
    response={200: S.BeliefPage, **READ_ERRORS},
    url_name="belief_list",
    tags=["Memory"],
    operation_id="listBeliefs",
    summary="Beliefs (observations) as of the horizon, with their trend.",
)
def belief_list(request: HttpRequest, save_id: str, params: Query[S.BeliefQuery]):
    save = save_for(user=request.user, save_id=save_id)
    limit, offset = params.limit, params.offset
    horizon = _horizon(params, save)
    beliefs = belief_list_at_turn(
        game_save=save,
        horizon=horizon,
        subject=params.subject,
        trend=params.trend,
        stale=params.stale,
        offset=offset,
        limit=limit + 1,
    )
    items = [serializers.belief_json(b, horizon) for b in beliefs]
    return JsonResponse(page(items, limit=limit, offset=offset) | {"now_turn": horizon})


@router.get(
    SAVE + "/mental-models",
    response={200: S.MentalModelPage, **READ_ERRORS},
    url_name="mental_model_list",
    tags=["Memory"],
    operation_id="listMentalModels",
    summary="Mental models as of the horizon.",
)
def mental_model_list(request: HttpRequest, save_id: str, params: Query[S.MentalModelQuery]):
    save = save_for(user=request.user, save_id=save_id)
    limit, offset = params.limit, params.offset
    models = mental_model_list_at_turn(
        game_save=save, horizon=_horizon(params, save), subject=params.subject, offset=offset, limit=limit + 1
    )
    return JsonResponse(page([serializers.mental_model_json(m) for m in models], limit=limit, offset=offset))


# -- memory query and the assembled context ------------------------------------------------


def _built(request: HttpRequest, params, build):
    """Return `build()` (SearchParams / ContextParams), refusing `record` on a GET in the same 400.

    Recording writes, so it is a POST; then it needs the playtester role (403).
    """
    errors = {}
    if params.record and request.method != "POST":
        errors["record"] = ["Recording writes: send the request as a POST."]
    built = None
    try:
        built = build()
    except InvalidParameters as exc:
        for name, message in exc.errors.items():
            errors.setdefault(name, [message])
    if errors:
        raise validation_error(errors)
    if params.record:
        require(request.user, Access.PLAY)
    return built


def _memory_query(request: HttpRequest, save_id: str, params) -> JsonResponse:
    """Run VectorMemory.query on the save with every engine parameter; return results with explain records.

    A vector store that cannot be reached is a 503 (see faults.py); an embedding model that
    cannot load leaves the lexical arms, and the answer says so in `warnings`. The limits
    are `SearchParams`'s, the ones the search playground has.
    """
    save = save_for(user=request.user, save_id=save_id)
    search = _built(
        request,
        params,
        lambda: SearchParams(
            query_text=params.query_text or "",
            k=params.k,
            current_turn_id=params.current_turn_id,
            max_turn_id=params.max_turn_id,
            focus_terms=params.focus_terms,
            chunk_type=params.chunk_type,
            exclude_chunk_type=params.exclude_chunk_type,
            expand_links=bool(params.expand_links),
        ),
    )
    # memory_search clamps the horizon to the save's current turn: a chunk a failed rewind
    # left behind (turn > current) never comes back, whatever the client asks.
    outcome = memory_search(
        game_save=save,
        **search.search_kwargs(),
        expand_links=search.expand_links,
        record_source="api" if params.record else None,
    )
    results, knowledge = outcome.results, {}
    if getattr(params, "pov", None):  # who knows what: only hits these characters know (docs/knowledge.md)
        from studio.memory.knowledge.pov import pov_filter_results

        results, left_out = pov_filter_results(
            game_save=save, results=results, pov=params.pov, horizon=outcome.current_turn_id
        )
        knowledge = {"pov": list(params.pov), "pov_left_out": left_out}
    return _json(
        {
            "save_id": save.save_id,
            "query_text": search.query_text,
            "current_turn_id": outcome.current_turn_id,
            **knowledge,
            "results": [
                {**serializers.chunk_result_json(r), **({"pov": r["pov"]} if "pov" in r else {})} for r in results
            ],
            "warnings": _query_warnings(outcome.stats),
            "stats": outcome.stats.as_dict(),
        }
    )


QUERY_SUMMARY = "Search the save's narrative memory (VectorMemory.query) with every engine parameter."


@router.get(
    SAVE + "/query",
    response={200: S.QueryResult, **READ_ERRORS, 403: S.Error},
    url_name="memory_query",
    tags=["Memory"],
    operation_id="queryMemoryGet",
    summary=QUERY_SUMMARY,
)
def memory_query_get(request: HttpRequest, save_id: str, params: Query[S.QueryQuery]):
    return _memory_query(request, save_id, params)


@router.post(
    SAVE + "/query",
    response={200: S.QueryResult, **WRITE_ERRORS},
    tags=["Memory"],
    operation_id="queryMemory",
    summary=QUERY_SUMMARY,
)
def memory_query(request: HttpRequest, save_id: str, payload: S.QueryRequest):
    return _memory_query(request, save_id, payload)


def _query_warnings(stats) -> list[str]:
    """Say which retrieval arms were missing, so a degraded answer is never silent."""
    warnings = []
    if stats.vector_store_error:
        warnings.append(
            "The vector store is unreachable: results come from the lexical arms over the last "
            f"cached corpus ({stats.vector_store_error})."
        )
    elif not stats.semantic_available:
        warnings.append(
            "The semantic arm was unavailable (no embedding model): results come from the lexical arms only."
        )
    if not stats.lexical_available:
        warnings.append("The lexical (BM25) arm was unavailable: results come from the semantic arm only.")
    return warnings


def _memory_context(request: HttpRequest, save_id: str, params) -> JsonResponse:
    """The memory context for the save's next turn: what the narrator reads (`next_turn_context`)."""
    from studio.memory.recall.context import next_turn_context
    from studio.memory.recall.policy import context_budget_from_meta

    save = save_for(user=request.user, save_id=save_id)
    universe_meta = save.universe.meta_values()  # read once: the narrator's budget and the context
    budget = params.token_budget or context_budget_from_meta(universe_meta)  # absent: what the narrator reads
    context_params = _built(
        request,
        params,
        lambda: ContextParams(
            query_text=params.query_text,
            focus_terms=params.focus_terms,
            token_budget=budget,
            k_narrative=params.k_narrative,
            k_lore=params.k_lore,
            pov=S.pov_names(params.pov),
        ),
    )
    context = next_turn_context(
        game_save=save,
        params=context_params,
        record_source="context" if params.record else None,
        universe_meta=universe_meta,
    )
    return _json(context.as_dict())


CONTEXT_SUMMARY = "The memory context the narrator reads for the next turn, with why each item is in or out."


@router.get(
    SAVE + "/context",
    response={200: S.MemoryContext, **READ_ERRORS, 403: S.Error},
    url_name="memory_context",
    tags=["Memory"],
    operation_id="getMemoryContext",
    summary=CONTEXT_SUMMARY,
)
def memory_context_get(request: HttpRequest, save_id: str, params: Query[S.ContextQuery]):
    return _memory_context(request, save_id, params)


@router.post(
    SAVE + "/context",
    response={200: S.MemoryContext, **WRITE_ERRORS},
    tags=["Memory"],
    operation_id="postMemoryContext",
    summary=CONTEXT_SUMMARY,
)
def memory_context(request: HttpRequest, save_id: str, payload: S.ContextRequest):
    return _memory_context(request, save_id, payload)


# -- rewind and fork -----------------------------------------------------------------------

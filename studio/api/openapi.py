"""The OpenAPI 3.1 description of the JSON API, written by hand next to the views.

tests/api/test_openapi.py checks that every route in `studio.api.urls` is described here
(with the methods its view answers) and that nothing is described that does not exist.
"""
from __future__ import annotations

from copy import deepcopy
from typing import Any

from studio.memory.recall.context_lore import SHARE_CLASSES

API_VERSION = "1.0.0"

STRING = {"type": "string"}
INTEGER = {"type": "integer"}
BOOLEAN = {"type": "boolean"}
NULLABLE_STRING = {"type": ["string", "null"]}
NULLABLE_INTEGER = {"type": ["integer", "null"]}
DATETIME = {"type": ["string", "null"], "format": "date-time"}


def ref(name: str) -> dict:
    return {"$ref": f"#/components/schemas/{name}"}


def obj(properties: dict, required: list[str] | None = None, *, additional: bool | dict = True) -> dict:
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        schema["required"] = required
    if additional is not True:
        schema["additionalProperties"] = additional
    return schema


def paged(item: str) -> dict:
    return obj(
        {
            "items": {"type": "array", "items": ref(item)},
            "limit": INTEGER,
            "offset": INTEGER,
            "next_offset": {**NULLABLE_INTEGER, "description": "Offset of the next page; null on the last page."},
        },
        ["items", "limit", "offset", "next_offset"],
    )


def json_response(description: str, schema: dict) -> dict:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def error(description: str) -> dict:
    return {"$ref": f"#/components/responses/{description}"}


def json_body(schema: dict, *, required: bool = True) -> dict:
    return {"required": required, "content": {"application/json": {"schema": schema}}}


def query(name: str, schema: dict, description: str, *, required: bool = False) -> dict:
    return {"name": name, "in": "query", "required": required, "schema": schema, "description": description}


JOB_STATUSES = ["queued", "running", "done", "failed", "skipped", "paused"]
JOB_ID = {"name": "job_id", "in": "path", "required": True, "schema": INTEGER, "description": "The job's id."}
TURN_ID = {"name": "turn_id", "in": "path", "required": True, "schema": INTEGER, "description": "The turn."}
CHAPTER_ID = {"name": "chapter_id", "in": "path", "required": True, "schema": INTEGER, "description": "The chapter's id."}
SAVE_ID = {"name": "save_id", "in": "path", "required": True, "schema": STRING, "description": "The save's public id."}
PAGE = [
    query("limit", {"type": "integer", "minimum": 1, "maximum": 200, "default": 50}, "Page size."),
    query("offset", {"type": "integer", "minimum": 0, "default": 0}, "Rows to skip."),
]
MAX_TURN = query("max_turn_id", {"type": "integer", "minimum": 0}, "Only rows from turns <= this (the history window).")

READ_ERRORS = {
    "400": error("ValidationError"),
    "401": error("Unauthenticated"),
    "404": error("NotFound"),
    "503": error("Unavailable"),
}
WRITE_ERRORS = {
    **READ_ERRORS,
    "403": error("Forbidden"),
    "409": error("Conflict"),
    "413": error("BodyTooLarge"),
    "415": error("UnsupportedMediaType"),
}


def operation(operation_id: str, summary: str, responses: dict, *, tag: str, parameters=None, body=None,
              errors=None, description: str | None = None) -> dict:
    op: dict[str, Any] = {"operationId": operation_id, "summary": summary, "tags": [tag], "responses": {}}
    if description:
        op["description"] = description
    if parameters:
        op["parameters"] = parameters
    if body:
        op["requestBody"] = body
    op["responses"].update(responses)
    op["responses"].update(errors if errors is not None else READ_ERRORS)
    return op


SCHEMAS: dict[str, Any] = {
    "Error": obj(
        {
            "error": obj(
                {
                    "code": {**STRING, "description": "Stable machine-readable code, e.g. validation_error."},
                    "message": {**STRING, "description": "What went wrong, for a person."},
                    "details": {
                        "type": "object",
                        "description": "For validation errors: {field: [messages]}; otherwise extra context.",
                    },
                },
                ["code", "message", "details"],
            )
        },
        ["error"],
    ),
    "Me": obj(
        {
            "username": STRING,
            "roles": obj({"staff": BOOLEAN, "author": BOOLEAN, "playtester": BOOLEAN}),
            "authenticated_by": {"type": "string", "enum": ["token", "session"]},
            "token": {"oneOf": [ref("Token"), {"type": "null"}]},
        },
        ["username", "roles", "authenticated_by"],
    ),
    "Token": obj({"name": STRING, "prefix": STRING, "created_at": DATETIME, "last_used_at": DATETIME}),
    "Universe": obj(
        {"slug": STRING, "name": STRING, "description": STRING, "created_at": DATETIME, "updated_at": DATETIME},
        ["slug", "name"],
    ),
    "Save": obj(
        {
            "save_id": STRING,
            "name": STRING,
            "universe": {**STRING, "description": "The universe's slug."},
            "memory_mode": {"type": "string", "enum": ["classic", "living"]},
            "beliefs_enabled": BOOLEAN,
            "current_turn": INTEGER,
            "timeline_generation": {**INTEGER, "description": "Incremented by every rewind."},
            "forked_from": NULLABLE_STRING,
            "fork_turn": NULLABLE_INTEGER,
            "created_at": DATETIME,
            "last_activity_at": DATETIME,
        },
        ["save_id", "name", "universe", "memory_mode", "current_turn", "timeline_generation"],
    ),
    "SaveCreate": obj(
        {
            "universe": {**STRING, "description": "Slug of a universe you belong to."},
            "name": {"type": "string", "minLength": 1, "maxLength": 200},
            "memory_mode": {"type": "string", "enum": ["classic", "living"], "default": "classic"},
            "beliefs_enabled": {"type": "boolean", "default": True},
        },
        ["universe", "name"],
        additional=False,
    ),
    "Turn": obj(
        {
            "turn_id": INTEGER,
            "player_input": STRING,
            "narrative": STRING,
            "created_at": DATETIME,
            "state": {"type": "object", "description": "Only when asked for (include_state) or just appended."},
        },
        ["turn_id", "player_input", "narrative"],
    ),
    "TurnAppend": obj(
        {
            "player_input": {"type": "string", "maxLength": 20000, "default": ""},
            "narrative": {"type": "string", "maxLength": 200000},
            "state": {"type": "object", "description": "The game state after the turn (State_Cache)."},
            "turn_id": {
                "type": "integer",
                "minimum": 1,
                "description": "Optional: the turn this should become; 409 unless it is current_turn + 1.",
            },
        },
        ["narrative"],
        additional=False,
    ),
    "TurnAppended": obj({"turn": ref("Turn"), "save": ref("Save")}, ["turn", "save"]),
    "Fact": obj(
        {
            "fact_id": INTEGER,
            "turn_id": INTEGER,
            "statement": STRING,
            "fact_type": STRING,
            "who": STRING,
            "what": STRING,
            "when": STRING,
            "where": STRING,
            "why": STRING,
            "entities": {"type": "array", "items": STRING},
        },
        ["fact_id", "turn_id", "statement"],
    ),
    "Belief": obj(
        {
            "observation_id": INTEGER,
            "statement": STRING,
            "subject": {**STRING, "description": "Who the belief is about; '' for the world."},
            "proof_count": INTEGER,
            "sources": {"type": "array", "items": obj({"fact_id": INTEGER, "turn_id": INTEGER})},
            "history": {"type": "array", "items": {"type": "object"}},
            "created_turn_id": INTEGER,
            "updated_turn_id": INTEGER,
            "stale": BOOLEAN,
            "trend": {"type": "string", "enum": ["new", "strengthening", "weakening", "stale", "stable"]},
        },
        ["observation_id", "statement", "subject", "proof_count", "trend"],
    ),
    "MentalModel": obj(
        {
            "model_id": INTEGER,
            "subject": STRING,
            "summary": STRING,
            "sources": {"type": "array", "items": INTEGER},
            "created_turn_id": INTEGER,
            "updated_turn_id": INTEGER,
            "stale": BOOLEAN,
        },
        ["model_id", "subject", "summary"],
    ),
    "RewindRequest": obj(
        {
            "turn_id": {"type": "integer", "minimum": 0, "description": "Rewind to the end of this turn."},
            "expected_current_turn": {
                "type": "integer",
                "minimum": 0,
                "description": "Optional guard: 409 if the save is no longer at this turn.",
            },
        },
        ["turn_id"],
        additional=False,
    ),
    "RewindResult": obj(
        {
            "save_id": STRING,
            "from_turn": INTEGER,
            "target_turn": INTEGER,
            "changed": {**BOOLEAN, "description": "False when the save already was at the target turn."},
            "message": STRING,
            "counts": {"type": "object", "additionalProperties": NULLABLE_INTEGER},
            "timeline_generation": INTEGER,
            "vector_pending": BOOLEAN,
            "vector_error": STRING,
            "save": ref("Save"),
        },
        ["save_id", "from_turn", "target_turn", "changed", "message", "counts", "save"],
    ),
    "RewindPreview": obj(
        {
            "save_id": STRING,
            "from_turn": INTEGER,
            "target_turn": INTEGER,
            "changed": BOOLEAN,
            "message": STRING,
            "counts": {"type": "object", "additionalProperties": INTEGER},
            "beliefs_deleted": {"type": "array", "items": ref("Belief")},
            "beliefs_changed": {
                "type": "array",
                "items": obj({"before": ref("Belief"), "after": ref("Belief"), "restored": BOOLEAN}),
            },
            "mental_models_deleted": {"type": "array", "items": ref("MentalModel")},
            "mental_models_changed": {
                "type": "array",
                "items": obj({"before": ref("MentalModel"), "after": ref("MentalModel")}),
            },
        },
        ["save_id", "from_turn", "target_turn", "changed", "message", "counts"],
    ),
    "Chapter": obj(
        {
            "id": INTEGER, "level": INTEGER, "kind": STRING, "first_turn": INTEGER, "last_turn": INTEGER,
            "closed_turn": INTEGER,
            "close_reason": {"type": "string", "enum": ["playtester", "scene", "length", "rollup", "import"]},
            "close_note": STRING, "story_time": STRING, "summary": STRING,
            "summary_status": {"type": "string", "enum": ["pending", "done", "no_model", "failed", "empty"]},
            "summary_error": STRING, "summary_model": STRING, "edited": BOOLEAN, "generated_summary": STRING,
        },
        ["id", "level", "first_turn", "last_turn", "close_reason", "summary", "summary_status", "edited"],
    ),
    "Job": obj(
        {
            "id": INTEGER,
            "kind": {"type": "string", "enum": ["sync_lore", "embed_turn", "living_turn", "refresh_models", "vector_rollback", "fork_vectors", "summarize_chapter"]},
            "status": {"type": "string", "enum": JOB_STATUSES},
            "save_id": NULLABLE_STRING,
            "turn_id": NULLABLE_INTEGER,
            "timeline_generation": INTEGER,
            "progress": STRING,
            "error": STRING,
            "attempts": INTEGER,
            "result": {"type": "object"},
            "created_at": DATETIME,
            "started_at": DATETIME,
            "finished_at": DATETIME,
            "duration_seconds": {"type": ["number", "null"]},
        },
        ["id", "kind", "status"],
    ),
    "QueryRequest": obj(
        {
            "query_text": {"type": "string", "minLength": 1, "maxLength": 4000},
            "k": {"type": "integer", "minimum": 1, "maximum": 100, "default": 5},
            "current_turn_id": {
                "type": "integer",
                "minimum": 0,
                "description": "The horizon; never later than the save's current turn (the default).",
            },
            "max_turn_id": {"type": "integer", "minimum": 0, "description": "Only chunks from turns <= this."},
            "focus_terms": {
                "type": "array",
                "items": {"type": "string", "maxLength": 200},
                "maxItems": 50,
                "description": "Here-and-now terms (location, characters on scene) that boost chunks naming them.",
            },
            "chunk_type": {**STRING, "description": "Only chunks of this type, e.g. lore."},
            "exclude_chunk_type": {**STRING, "description": "No chunks of this type, e.g. lore."},
            "expand_links": {
                "type": "boolean",
                "default": False,
                "description": "Also return the lore entries each lore hit links to (one hop), after the top k.",
            },
            "record": {
                "type": "boolean",
                "default": False,
                "description": "Store the query for lore-edit replay (needs the playtester role).",
            },
        },
        ["query_text"],
        additional=False,
    ),
    "Chunk": obj(
        {
            "id": {**STRING, "description": "The chunk id in the vector store."},
            "text": STRING,
            "turn_id": NULLABLE_INTEGER,
            "chunk_type": NULLABLE_STRING,
            "entry_id": {**NULLABLE_STRING, "description": "The lore entry a lore chunk came from."},
            "score": {"type": ["number", "null"]},
            "distance": {"type": ["number", "null"]},
            "metadata": {"type": ["object", "null"]},
            "explain": {
                "type": ["object", "null"],
                "description": "Why the chunk ranked where it did: per-arm ranks and scores, focus boost, rerank score.",
            },
        },
        ["id", "text", "explain"],
    ),
    "QueryResult": obj(
        {
            "save_id": STRING,
            "query_text": STRING,
            "current_turn_id": INTEGER,
            "results": {"type": "array", "items": ref("Chunk")},
            "warnings": {"type": "array", "items": STRING, "description": "Degradations, e.g. a retrieval arm was down."},
            "stats": {
                "type": "object",
                "description": "What the search did: stage timings (ms), corpus and filtered sizes, arm sizes, arm availability.",
            },
        },
        ["save_id", "query_text", "current_turn_id", "results", "warnings", "stats"],
    ),
    "ContextRequest": obj(
        {
            "query_text": {"type": "string", "maxLength": 4000, "description": "Usually the player's input."},
            "focus_terms": {"type": "array", "items": STRING, "maxItems": 50},
            "token_budget": {"type": "integer", "minimum": 1, "maximum": 100000, "default": 1200},
            "k_narrative": {"type": "integer", "minimum": 1, "maximum": 100, "default": 6},
            "k_lore": {"type": "integer", "minimum": 1, "maximum": 100, "default": 4},
            "record": {"type": "boolean", "default": False},
        },
        additional=False,
    ),
    "NarrateRequest": obj(
        {"player_input": {"type": "string", "maxLength": 4000, "description": "The player's action."}},
        required=["player_input"], additional=False,
    ),
    "Narration": obj(
        {
            "save_id": STRING, "turn_id": INTEGER, "player_input": STRING, "narrative": STRING,
            "appended": {"type": "boolean", "const": False}, "model": STRING, "finish_reason": STRING,
            "truncated": {"type": "boolean"}, "latency_ms": INTEGER, "prompt_tokens": INTEGER, "completion_tokens": INTEGER,
            "prompt": obj({"system": STRING, "user": STRING, "chars": INTEGER}),
            "context": ref("MemoryContext"),
        },
    ),
    "ContextItem": obj(
        {
            "layer": {"type": "string", "enum": ["mental_model", "belief", "fact", "narrative", "lore"]},
            "text": STRING,
            "tokens": INTEGER,
            "reason": STRING,
            "why": {"type": "object"},
            "ref": {"type": "object"},
            "included": BOOLEAN,
            "cut": {**STRING, "description": "Why an item was left out whole (over budget or over its layer's share); empty when included."},
        },
        ["layer", "text", "tokens", "included"],
    ),
    "MemoryContext": obj(
        {
            "save_id": STRING,
            "turn": INTEGER,
            "query_text": STRING,
            "focus_terms": {"type": "array", "items": STRING},
            "subjects": {"type": "array", "items": STRING},
            "token_budget": INTEGER,
            "used_tokens": INTEGER,
            "cut_tokens": INTEGER,
            "items": {"type": "array", "items": ref("ContextItem")},
            "text": {**STRING, "description": "The included items as the block a narrator prompt carries."},
            "timings": {"type": "object", "additionalProperties": {"type": "number"}},
            "notes": {"type": "array", "items": STRING},
            "shares": {
                "type": "object", "additionalProperties": INTEGER,
                "description": "Budget share per class (percent of token_budget; Universe_Meta context_share_*): "
                               + ", ".join(SHARE_CLASSES) + ".",
            },
            "macros": {
                "type": "object", "additionalProperties": STRING,
                "description": "Who {{user}} (the player character) and {{char}} (the card's character, else the "
                               "first character in focus who is not the player) are in the item texts.",
            },
            "queries": {
                "type": "array", "items": {"type": "object"},
                "description": "The two vector queries (narrative, lore) as Lore replay records them: query_text, "
                               "params, result_ids.",
            },
            "lore_explain": {
                "type": "array", "items": ref("LoreExplanation"),
                "description": "One record per entry of the save's Lore Book, in book order: in or out, and why.",
            },
        },
        ["save_id", "turn", "token_budget", "used_tokens", "items", "text", "lore_explain"],
    ),
    "LoreExplanation": obj(
        {
            "entry_id": STRING,
            "title": STRING,
            "included": {**BOOLEAN, "description": "In the assembled context (activated or found by meaning, and within the budget)."},
            "activated": {**BOOLEAN, "description": "Activated by the Lore Book's rules for the next turn."},
            "code": {**STRING, "description": "The activation decision: constant, key, recursion, sticky, cooldown, delay, "
                                             "delay_until_recursion, exclude_recursion, secondary, additional_keys, "
                                             "exclude_keys, group, probability, budget, disabled, no_keys, no_match, "
                                             "beyond_scan_depth, forced, forced_off, after_first_match, "
                                             "activate_only_after, activate_only_every."},
            "reasons": {"type": "array", "items": STRING, "description": "The activation decision in sentences."},
            "matched_key": STRING,
            "matched_in": {**STRING, "description": "Where the key matched: the pending input, turn N (player input | narrative), or an entry's text (recursion)."},
            "via_entry": {**STRING, "description": "The entry whose text activated this one (recursion)."},
            "pass_index": NULLABLE_INTEGER,
            "roll": {"type": ["number", "null"], "description": "Probability roll (0-100) when one was drawn."},
            "threshold": {"type": ["number", "null"], "description": "The entry's probability."},
            "group": STRING,
            "rivals": {"type": "array", "items": STRING, "description": "Entry ids it won its inclusion group against, or lost to."},
            "regex_timeouts": {"type": "array", "items": STRING, "description": "Regex keys of the entry whose search ran past its time limit (100 ms) and so counted as not matching."},
            "semantic_rank": {**NULLABLE_INTEGER, "description": "Rank among the lore found by meaning, when it was found."},
            "context": {"type": "array", "items": STRING, "description": "What the context did: semantic rank, budget decision."},
        },
        ["entry_id", "title", "included", "activated", "code", "reasons", "context"],
    ),
    "ForkRequest": obj(
        {
            "turn_id": {"type": "integer", "minimum": 0, "description": "Fork as of this turn (default: the current turn)."},
            "name": {"type": "string", "maxLength": 200},
        },
        additional=False,
    ),
}


def _error_response(description: str) -> dict:
    return json_response(description, ref("Error"))


RESPONSES = {
    "ValidationError": _error_response("Invalid parameters or body (details lists each field), or invalid JSON."),
    "Unauthenticated": {
        **_error_response("No credentials, or an unknown or revoked token."),
        "headers": {"WWW-Authenticate": {"schema": STRING}},
    },
    "Forbidden": _error_response("Authenticated, but the role does not allow this (or a session write without CSRF)."),
    "NotFound": _error_response("No such object, or it belongs to a universe you are not a member of."),
    "Conflict": _error_response("The save changed in the meantime, or the turn is not where the request expects."),
    "BodyTooLarge": _error_response("The body is larger than AXIOM_API_MAX_BODY_BYTES."),
    "UnsupportedMediaType": _error_response("The body is not application/json."),
    "Unavailable": {
        **_error_response("The vector store or the database is unavailable; retry after the given delay."),
        "headers": {"Retry-After": {"schema": STRING}},
    },
}


def _paths() -> dict[str, Any]:
    saves = "Saves"
    memory = "Memory"
    return {
        "/openapi.json": {
            "get": operation(
                "getOpenApi", "This document.", {"200": json_response("The OpenAPI description.", {"type": "object"})},
                tag="Meta", errors={"401": error("Unauthenticated")},
            )
        },
        "/me": {
            "get": operation(
                "getMe", "Who the credentials belong to, and their roles.", {"200": json_response("The caller.", ref("Me"))},
                tag="Meta", errors={"401": error("Unauthenticated")},
            )
        },
        "/universes": {
            "get": operation(
                "listUniverses", "Universes you own or are a member of (staff: all).",
                {"200": json_response("A page of universes.", paged("Universe"))}, tag="Universes", parameters=PAGE,
                errors={"400": error("ValidationError"), "401": error("Unauthenticated")},
            )
        },
        "/saves": {
            "get": operation(
                "listSaves", "Saves of the universes you may see, most recently played first.",
                {"200": json_response("A page of saves.", paged("Save"))}, tag=saves,
                parameters=[query("universe", STRING, "Only saves of this universe (slug)."), *PAGE],
                errors={"400": error("ValidationError"), "401": error("Unauthenticated")},
            ),
            "post": operation(
                "createSave", "Start a new save (playthrough) of a universe; its meta is copied at creation.",
                {"201": json_response("The new save.", ref("Save"))}, tag=saves, body=json_body(ref("SaveCreate")),
                errors=WRITE_ERRORS,
            ),
        },
        "/saves/{save_id}": {
            "parameters": [SAVE_ID],
            "get": operation("getSave", "One save.", {"200": json_response("The save.", ref("Save"))}, tag=saves),
        },
        "/saves/{save_id}/turns": {
            "parameters": [SAVE_ID],
            "get": operation(
                "listTurns", "The save's turns (Event_Log), oldest first.",
                {"200": json_response("A page of turns.", paged("Turn"))}, tag=saves,
                parameters=[
                    query("after_turn", {"type": "integer", "minimum": 0}, "Only turns after this one."),
                    query("include_state", BOOLEAN, "Add each turn's state JSON."),
                    *PAGE,
                ],
            ),
            "post": operation(
                "appendTurn", "Append the next turn: player input, narrative and state.",
                {"201": json_response("The stored turn and the save after it.", ref("TurnAppended"))}, tag=saves,
                body=json_body(ref("TurnAppend")), errors=WRITE_ERRORS,
                description=(
                    "The narrative is embedded in the background (see the save's jobs); in living mode the "
                    "fact extraction, consolidation and reflection jobs follow."
                ),
            ),
        },
        "/saves/{save_id}/turns/{turn_id}": {
            "parameters": [SAVE_ID, TURN_ID],
            "get": operation("getTurn", "One turn with its state.", {"200": json_response("The turn.", ref("Turn"))}, tag=saves),
            "patch": operation(
                "updateTurnNarrative", "Replace a turn's narrative; it is re-embedded (and re-extracted in living mode).",
                {"200": json_response("The turn.", ref("Turn"))}, tag=saves,
                body=json_body(obj({"narrative": {"type": "string", "maxLength": 200000}}, ["narrative"], additional=False)),
                errors=WRITE_ERRORS,
            ),
        },
        "/saves/{save_id}/facts": {
            "parameters": [SAVE_ID],
            "get": operation(
                "listFacts", "Facts extracted from the narrative, most recent first.",
                {"200": json_response("A page of facts.", paged("Fact"))}, tag=memory,
                parameters=[MAX_TURN, query("entity", STRING, "Only facts naming this entity (case-insensitive)."), *PAGE],
            ),
        },
        "/saves/{save_id}/beliefs": {
            "parameters": [SAVE_ID],
            "get": operation(
                "listBeliefs", "Beliefs (observations) with their trend, most recently updated first.",
                {
                    "200": json_response(
                        "A page of beliefs; now_turn is the turn the trends are read at.",
                        {
                            "allOf": [
                                paged("Belief"),
                                obj({"now_turn": INTEGER}, ["now_turn"]),
                            ]
                        },
                    )
                },
                tag=memory,
                parameters=[
                    MAX_TURN,
                    query("subject", STRING, "Only beliefs about this subject (case-insensitive; empty = the world)."),
                    query("trend", {"type": "string", "enum": ["new", "strengthening", "weakening", "stale", "stable"]}, "Only beliefs with this trend."),
                    query("stale", BOOLEAN, "Only beliefs flagged stale (true) or not (false)."),
                    *PAGE,
                ],
            ),
        },
        "/saves/{save_id}/mental-models": {
            "parameters": [SAVE_ID],
            "get": operation(
                "listMentalModels", "Mental models (one profile per subject), most recently updated first.",
                {"200": json_response("A page of mental models.", paged("MentalModel"))}, tag=memory,
                parameters=[MAX_TURN, query("subject", STRING, "Only the model of this subject."), *PAGE],
            ),
        },
        "/saves/{save_id}/query": {
            "parameters": [SAVE_ID],
            "get": operation(
                "queryMemoryGet", "Hybrid memory search (query-string form of POST; focus_terms may repeat).",
                {"200": json_response("The ranked chunks with explain records.", ref("QueryResult"))}, tag=memory,
                parameters=[
                    query("query_text", STRING, "What to search for.", required=True),
                    query("k", {"type": "integer", "minimum": 1, "maximum": 100, "default": 5}, "How many chunks."),
                    query("current_turn_id", {"type": "integer", "minimum": 0}, "The horizon (default: current turn)."),
                    MAX_TURN,
                    {**query("focus_terms", {"type": "array", "items": STRING}, "Here-and-now terms."), "explode": True},
                    query("chunk_type", STRING, "Only chunks of this type."),
                    query("exclude_chunk_type", STRING, "No chunks of this type."),
                    query("expand_links", BOOLEAN, "Add linked lore entries of lore hits."),
                    query("record", BOOLEAN, "Refused here (400): recording writes, so it is a POST."),
                ],
                errors={**READ_ERRORS, "403": error("Forbidden")},
            ),
            "post": operation(
                "queryMemory", "Hybrid memory search with every VectorMemory.query parameter.",
                {"200": json_response("The ranked chunks with explain records.", ref("QueryResult"))}, tag=memory,
                body=json_body(ref("QueryRequest")),
                errors={**READ_ERRORS, "403": error("Forbidden"), "413": error("BodyTooLarge"), "415": error("UnsupportedMediaType")},
                description="Reading needs membership only; record=true needs the playtester role.",
            ),
        },
        "/saves/{save_id}/context": {
            "parameters": [SAVE_ID],
            "get": operation(
                "getMemoryContextGet", "The assembled memory context for the next turn (query-string form).",
                {"200": json_response("The context, item by item, and as text.", ref("MemoryContext"))}, tag=memory,
                parameters=[
                    query("query_text", STRING, "Usually the player's input."),
                    {**query("focus_terms", {"type": "array", "items": STRING}, "Characters / places in focus."), "explode": True},
                    query("token_budget", {"type": "integer", "minimum": 1, "maximum": 100000, "default": 1200}, "Token budget."),
                    query("k_narrative", {"type": "integer", "minimum": 1, "maximum": 100, "default": 6}, "Narrative chunks to consider."),
                    query("k_lore", {"type": "integer", "minimum": 1, "maximum": 100, "default": 4}, "Lore chunks to consider."),
                    query("record", BOOLEAN, "Refused here (400): recording writes, so it is a POST."),
                ],
                errors={**READ_ERRORS, "403": error("Forbidden")},
            ),
            "post": operation(
                "getMemoryContext",
                "The memory context the narrator gets for the next turn: mental models, beliefs, facts, narrative, lore, within a token budget.",
                {"200": json_response("The context, item by item, and as text.", ref("MemoryContext"))}, tag=memory,
                body=json_body(ref("ContextRequest"), required=False),
                errors={**READ_ERRORS, "403": error("Forbidden"), "413": error("BodyTooLarge"), "415": error("UnsupportedMediaType")},
            ),
        },
        "/saves/{save_id}/narrate": {
            "parameters": [SAVE_ID],
            "post": operation(
                "narrate",
                "A proposed narrative for player_input as the next turn, from the save's narrator; nothing is appended.",
                {"200": json_response("The proposal, its model and usage, and the prompt and memory context behind it.", ref("Narration"))},
                tag=memory,
                body=json_body(ref("NarrateRequest")),
                errors={
                    **WRITE_ERRORS,
                    "429": {"description": "The save's hourly LLM budget (spend guard) is used up.", "content": {"application/json": {"schema": ref("Error")}}},
                    "502": {"description": "The model failed.", "content": {"application/json": {"schema": ref("Error")}}},
                },
                description="Needs the playtester role. Answers 503 with code no_model when no LLM is configured. Append the text with POST /saves/{save_id}/turns (turn_id = the proposal's turn_id).",
            ),
        },
        "/saves/{save_id}/rewind-preview": {
            "parameters": [SAVE_ID],
            "get": operation(
                "previewRewind", "What a rewind to turn_id would delete or roll back; changes nothing.",
                {"200": json_response("The preview.", ref("RewindPreview"))}, tag=saves,
                parameters=[query("turn_id", {"type": "integer", "minimum": 0}, "The target turn.", required=True)],
                errors={**READ_ERRORS, "409": error("Conflict")},
            ),
        },
        "/saves/{save_id}/rewind": {
            "parameters": [SAVE_ID],
            "post": operation(
                "rewindSave", "Rewind the save to the end of turn_id (idempotent: again at the same turn changes nothing).",
                {"200": json_response("What the rewind did.", ref("RewindResult"))}, tag=saves,
                body=json_body(ref("RewindRequest")), errors=WRITE_ERRORS,
            ),
        },
        "/saves/{save_id}/fork": {
            "parameters": [SAVE_ID],
            "post": operation(
                "forkSave", "Copy the save as it stood at turn_id into a new save; the original is untouched.",
                {"201": json_response("The new save.", ref("Save"))}, tag=saves,
                body=json_body(ref("ForkRequest"), required=False), errors=WRITE_ERRORS,
            ),
        },
        "/saves/{save_id}/jobs": {
            "parameters": [SAVE_ID],
            "get": operation(
                "listJobs", "The save's background jobs (embedding, living memory, vector rollback), newest first.",
                {"200": json_response("A page of jobs.", paged("Job"))}, tag="Jobs",
                parameters=[
                    query("status", {"type": "string", "enum": JOB_STATUSES}, "Only jobs in this status."),
                    query("kind", STRING, "Only jobs of this kind."),
                    query("turn_id", {"type": "integer", "minimum": 0}, "Only jobs for this turn."),
                    *PAGE,
                ],
            ),
        },
        "/saves/{save_id}/jobs/{job_id}": {
            "parameters": [SAVE_ID, JOB_ID],
            "get": operation("getJob", "One job.", {"200": json_response("The job.", ref("Job"))}, tag="Jobs"),
        },
        "/saves/{save_id}/jobs/{job_id}/retry": {
            "parameters": [SAVE_ID, JOB_ID],
            "post": operation(
                "retryJob", "Queue a failed, skipped or paused job again (a per-turn job a rewind skipped: "
                "on the live timeline if its turn still exists; 409 with the reason if the rewind dropped it).",
                {"200": json_response("The job, queued.", ref("Job"))}, tag="Jobs",
                errors={**READ_ERRORS, "403": error("Forbidden"), "409": error("Conflict")},
            ),
        },
        "/saves/{save_id}/chapters": {
            "parameters": [SAVE_ID],
            "get": operation(
                "listChapters", "The save's chapters and arcs in turn order (summaries, who closed them, story time), "
                "the open chapter, and the Universe_Meta settings that close chapters.",
                {"200": json_response("Chapters, the open chapter, the settings.", obj(
                    {"items": {"type": "array", "items": ref("Chapter")}, "open_chapter": obj({"first_turn": INTEGER, "current_turn": INTEGER}),
                     "settings": obj({})}, ["items", "open_chapter", "settings"]))},
                tag="Chapters",
            ),
        },
        "/saves/{save_id}/chapters/close": {
            "parameters": [SAVE_ID],
            "post": operation(
                "closeChapter", "Close the open chapter at the current turn; its summary job is queued (without a "
                "model the chapter says no summary was made). 409 when the open chapter has no turns.",
                {"201": json_response("The closed chapter.", ref("Chapter"))}, tag="Chapters",
                body=json_body(obj({"note": {"type": "string", "maxLength": 300}}), required=False),
                errors={**READ_ERRORS, "403": error("Forbidden"), "409": error("Conflict")},
            ),
        },
        "/saves/{save_id}/chapters/{chapter_id}": {
            "parameters": [SAVE_ID, CHAPTER_ID],
            "get": operation("getChapter", "One chapter or arc.", {"200": json_response("The chapter.", ref("Chapter"))},
                             tag="Chapters"),
            "patch": operation(
                "editChapterSummary", "Set the playtester's summary: an override, marked edited, never regenerated over "
                "(the model's text is kept as generated_summary). An empty summary removes the edit.",
                {"200": json_response("The chapter.", ref("Chapter"))}, tag="Chapters",
                body=json_body(obj({"summary": {"type": "string", "maxLength": 20000}}, ["summary"], additional=False)),
                errors={**READ_ERRORS, "403": error("Forbidden"), "409": error("Conflict")},
            ),
        },
        "/saves/{save_id}/chapters/{chapter_id}/summarize": {
            "parameters": [SAVE_ID, CHAPTER_ID],
            "post": operation(
                "summarizeChapter", "Queue a new summary of the chapter (409 if a playtester edited it, or no model is configured).",
                {"200": json_response("The chapter, its summary pending.", ref("Chapter"))}, tag="Chapters",
                errors={**READ_ERRORS, "403": error("Forbidden"), "409": error("Conflict")},
            ),
        },
        "/saves/{save_id}/jobs/retry-skipped": {
            "parameters": [SAVE_ID],
            "post": operation(
                "retrySkippedJobs",
                "Queue again every skipped memory job (embedding, living, refresh) of the save whose turn is "
                "still on its live timeline; the others are left and counted.",
                {"200": json_response("How many were recovered and left.", obj(
                    {"recovered": INTEGER, "left": INTEGER, "reasons": {"type": "array", "items": STRING}},
                    ["recovered", "left", "reasons"],
                ))},
                tag="Jobs",
                errors={**READ_ERRORS, "403": error("Forbidden")},
            ),
        },
    }


def build_openapi(*, server_url: str = "/api/v1") -> dict[str, Any]:
    """Return the OpenAPI 3.1 document (a fresh copy: callers may change it)."""
    return deepcopy(
        {
            "openapi": "3.1.0",
            "info": {
                "title": "Axiom Studio engine API",
                "version": API_VERSION,
                "summary": "Append turns, query narrative memory, rewind and fork saves.",
                "description": "See docs/api.md for authentication, errors and examples.",
            },
            "servers": [{"url": server_url}],
            "security": [{"bearerAuth": []}],
            "paths": {**_paths(), **_save_file_paths()},
            "components": {
                "schemas": SCHEMAS,
                "responses": RESPONSES,
                "securitySchemes": {
                    "bearerAuth": {
                        "type": "http",
                        "scheme": "bearer",
                        "description": "A token created at /accounts/tokens/ (sent as 'Authorization: Bearer axm_...').",
                    }
                },
            },
        }
    )


# -- save files (studio/api/views_portable.py, studio/saves/portable/) ----------------------

TURN_REF = {"type": "integer", "minimum": 0, "description": "A turn of the save: 0 (the start) .. current_turn."}
FILE_ID = {"type": "integer", "minimum": 1, "description": "The item's id within the file (unique in its section)."}
SOURCE = obj({"fact_id": {**FILE_ID, "description": "A fact's file id."}, "turn_id": TURN_REF}, ["fact_id", "turn_id"], additional=False)


def _section(item: dict, description: str) -> dict:
    return {
        **obj(
            {
                "version": {"type": "integer", "minimum": 1},
                "optional": {**BOOLEAN, "description": "A studio that does not know the section may leave it out."},
                "items": {"type": "array", "items": item},
            },
            ["version", "optional", "items"],
            additional=False,
        ),
        "description": description,
    }


SCHEMAS.update(
    {
        "SaveFile": {
            **obj(
                {
                    "format": {"const": "axiom-save"},
                    "format_version": {"const": 1},
                    "universe": obj(
                        {
                            "slug": STRING,
                            "name": STRING,
                            "lore_hash": {**STRING, "description": "sha256 of the Lore Book content it was played with."},
                        },
                        ["slug", "name", "lore_hash"],
                        additional=False,
                    ),
                    "save": obj(
                        {
                            "name": {"type": "string", "minLength": 1, "maxLength": 200},
                            "memory_mode": {"type": "string", "enum": ["classic", "living"]},
                            "beliefs_enabled": BOOLEAN,
                            "meta": {"type": "object", "description": "Universe_Meta as copied into the save."},
                            "current_turn": {"type": "integer", "minimum": 0},
                            "timeline_generation": {"type": "integer", "minimum": 0},
                            "last_activity_at": {"type": "string", "format": "date-time"},
                        },
                        ["name", "memory_mode", "beliefs_enabled", "meta", "current_turn", "timeline_generation", "last_activity_at"],
                        additional=False,
                    ),
                    "sections": {
                        **obj(
                            {
                                "turns": _section(
                                    obj(
                                        {
                                            "turn_id": {"type": "integer", "minimum": 1},
                                            "player_input": STRING,
                                            "narrative": STRING,
                                            "created_at": {"type": "string", "format": "date-time"},
                                            "state": {"type": ["object", "null"]},
                                        },
                                        ["turn_id", "player_input", "narrative", "created_at", "state"],
                                        additional=False,
                                    ),
                                    "Every turn 1..current_turn, in order, with its state (null: none kept).",
                                ),
                                "facts": _section(
                                    obj(
                                        {
                                            "id": FILE_ID, "turn_id": TURN_REF, "statement": STRING,
                                            "fact_type": {"type": "string", "maxLength": 40},
                                            "who": STRING, "what": STRING, "when": STRING, "where": STRING, "why": STRING,
                                            "entities": {"type": "array", "items": STRING},
                                        },
                                        ["id", "turn_id", "statement", "fact_type", "who", "what", "when", "where", "why", "entities"],
                                        additional=False,
                                    ),
                                    "Facts, by turn then creation.",
                                ),
                                "beliefs": _section(
                                    obj(
                                        {
                                            "id": FILE_ID, "statement": STRING, "subject": STRING,
                                            "sources": {"type": "array", "items": SOURCE},
                                            "history": {
                                                "type": "array",
                                                "items": obj(
                                                    {
                                                        "action": STRING, "turn_id": TURN_REF, "statement": STRING, "subject": STRING,
                                                        "sources_added": {"type": "array", "items": SOURCE},
                                                    },
                                                    ["action", "turn_id"],
                                                    additional=False,
                                                ),
                                            },
                                            "created_turn_id": TURN_REF, "updated_turn_id": TURN_REF, "stale": BOOLEAN,
                                            "deleted_turn_id": {**NULLABLE_INTEGER, "description": "Set on a retired belief (a tombstone)."},
                                        },
                                        ["id", "statement", "subject", "sources", "history", "created_turn_id", "updated_turn_id", "stale", "deleted_turn_id"],
                                        additional=False,
                                    ),
                                    "Beliefs (observations), retired ones included, with their trail.",
                                ),
                                "mental_models": _section(
                                    obj(
                                        {
                                            "id": FILE_ID, "subject": STRING, "summary": STRING,
                                            "sources": {"type": "array", "items": {**FILE_ID, "description": "A belief's file id."}},
                                            "versions": {
                                                "type": "array",
                                                "items": obj(
                                                    {"turn_id": TURN_REF, "summary": STRING, "sources": {"type": "array", "items": INTEGER}},
                                                    ["turn_id", "summary", "sources"],
                                                    additional=False,
                                                ),
                                            },
                                            "created_turn_id": TURN_REF, "updated_turn_id": TURN_REF, "stale": BOOLEAN,
                                        },
                                        ["id", "subject", "summary", "sources", "versions", "created_turn_id", "updated_turn_id", "stale"],
                                        additional=False,
                                    ),
                                    "Mental models (one per subject) with their versions.",
                                ),
                                "jobs": _section(
                                    obj(
                                        {
                                            "id": FILE_ID,
                                            "kind": {"type": "string", "enum": ["sync_lore", "embed_turn", "living_turn", "refresh_models"]},
                                            "turn_id": NULLABLE_INTEGER, "timeline_generation": INTEGER,
                                            "status": {"type": "string", "enum": ["done", "failed", "skipped"]},
                                            "attempts": INTEGER, "progress": STRING, "error": STRING, "result": {"type": "object"},
                                            "llm_calls": INTEGER, "llm_tokens": INTEGER,
                                        },
                                        ["id", "kind", "turn_id", "timeline_generation", "status", "attempts", "progress", "error", "result", "llm_calls", "llm_tokens"],
                                        additional=False,
                                    ),
                                    "Outcomes of finished jobs (in-flight and vector-store jobs are not exported).",
                                ),
                                "llm_calls": _section(
                                    obj(
                                        {
                                            "job_id": {**NULLABLE_INTEGER, "description": "A job's file id."},
                                            "operation": STRING, "model": STRING, "prompt_tokens": INTEGER,
                                            "completion_tokens": INTEGER, "latency_ms": INTEGER, "error": STRING,
                                            "created_at": {"type": "string", "format": "date-time"},
                                        },
                                        ["job_id", "operation", "model", "prompt_tokens", "completion_tokens", "latency_ms", "error", "created_at"],
                                        additional=False,
                                    ),
                                    "The LLM call log.",
                                ),
                                "recorded_queries": _section(
                                    obj(
                                        {
                                            "turn_id": TURN_REF, "query_text": STRING, "params": {"type": "object"},
                                            "result_ids": {"type": "array", "items": STRING},
                                        },
                                        ["turn_id", "query_text", "params", "result_ids"],
                                        additional=False,
                                    ),
                                    "Memory queries recorded for lore-edit replay.",
                                ),
                                "lore_activation": _section(
                                    obj(
                                        {
                                            "turn_id": TURN_REF,
                                            "state": {"type": "object", "description": "sticky, cooldown (entry id -> [start, end, entry hash, protected], message clock) and first_matched (entry id -> turn)."},
                                            "activated": {"type": "array", "items": STRING, "description": "Entry ids in prompt order."},
                                            "sequence": {"type": "array", "items": STRING, "description": "Entry ids in the order they activated."},
                                        },
                                        ["turn_id", "state", "activated", "sequence"],
                                        additional=False,
                                    ),
                                    "The Lore Book's activation state after each turn (optional; registered by the memory app).",
                                ),
                            },
                            ["turns", "facts", "beliefs", "mental_models", "jobs", "llm_calls", "recorded_queries"],
                        ),
                        "additionalProperties": _section(
                            {"type": "object"}, "A section another app registered (narrator snapshots, lore activation state)."
                        ),
                    },
                },
                ["format", "format_version", "universe", "save", "sections"],
                additional=False,
            ),
            "description": "One save as a portable file; see docs/playtesting.md, \"Save files\".",
        },
        "SaveFileProblem": obj(
            {"location": {**STRING, "description": "Where in the file, e.g. sections.facts.items[3].turn_id."}, "message": STRING},
            ["location", "message"],
        ),
        "SaveImported": obj(
            {
                "save": ref("Save"),
                "counts": {"type": "object", "additionalProperties": INTEGER, "description": "Rows written per section."},
                "warnings": {"type": "array", "items": STRING, "description": "E.g. the target universe's lore differs."},
                "jobs_queued": {**INTEGER, "description": "The lore sync and turn embedding jobs that rebuild the vectors."},
            },
            ["save", "counts", "warnings", "jobs_queued"],
        ),
    }
)

RESPONSES["InvalidSaveFile"] = json_response(
    "The file was refused (nothing was written): details.problems lists each problem with its location.",
    {
        "allOf": [
            ref("Error"),
            obj({"error": obj({"details": obj({"problems": {"type": "array", "items": ref("SaveFileProblem")}}, ["problems"])})}),
        ]
    },
)


def _save_file_paths() -> dict[str, Any]:
    save_file = {"schema": ref("SaveFile")}
    return {
        "/saves/{save_id}/export": {
            "parameters": [SAVE_ID],
            "get": operation(
                "exportSave",
                "Download the save as one portable file.",
                {
                    "200": {
                        "description": "The save file, as an attachment. The same save always gives the same bytes.",
                        "headers": {"Content-Disposition": {"schema": STRING}},
                        "content": {
                            "application/json": save_file,
                            "application/gzip": {"schema": {"type": "string", "contentMediaType": "application/gzip"}},
                        },
                    }
                },
                tag="Saves",
                parameters=[query("compress", {"type": "string", "enum": ["gzip"]}, "Gzip the file (.json.gz).")],
                errors={**READ_ERRORS, "403": error("Forbidden")},
                description="Needs the playtester role. Vector chunks are not in the file; an import rebuilds them.",
            ),
        },
        "/universes/{slug}/saves/import": {
            "parameters": [
                {"name": "slug", "in": "path", "required": True, "schema": STRING, "description": "The universe to import into."}
            ],
            "post": operation(
                "importSave",
                "Create a new save from a save file; the file is checked whole first and written all or nothing.",
                {"201": json_response("The new save, what was written, and any warnings.", ref("SaveImported"))},
                tag="Saves",
                parameters=[query("name", {"type": "string", "maxLength": 200}, "A name for the new save (default: the file's).")],
                body={
                    "required": True,
                    "content": {
                        "application/json": save_file,
                        "application/gzip": {"schema": {"type": "string", "contentMediaType": "application/gzip"}},
                    },
                },
                errors={**WRITE_ERRORS, "400": error("InvalidSaveFile")},
                description=(
                    "The body is the file as exported (JSON, or gzip: told apart by the magic bytes), at most "
                    "AXIOM_SAVE_FILE_MAX_BYTES before and after decompression (413 beyond). The save's lore sync and "
                    "turn embeddings are queued when the import commits."
                ),
            ),
        },
    }

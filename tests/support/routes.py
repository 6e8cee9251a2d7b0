"""The studio's URL patterns and who may use each: the table the authorization and escaping tests walk.

Every URL pattern of the studio (not the admin, not the API, not the memory proxy's `/v1/`)
must appear in RULES with a rule for GET and for POST (tests/test_authorization.py fails until
it does); tests/test_escaping.py fetches every pattern whose GET rule is not "-".
"""

from __future__ import annotations

from django.urls import URLPattern, URLResolver, get_resolver

PUBLIC = {"login", "logout", "healthz", "favicon"}
SKIP_PREFIXES = ("admin/", "api/", "v1/")

# A rule says who is allowed:
#   any      every logged-in user
#   author*  the Authors role (no universe involved, e.g. create a universe)
#   player*  the Playtesters role (no save yet, e.g. create or import a save)
#   member   anyone who belongs to the universe (staff too)
#   author   a member with the Authors role
#   player   a member with the Playtesters role (authors and staff included)
#   own      only the owner of the object (API tokens: the author here)
#   -        the method is not accepted (405 for everyone allowed to see the page)
RULES: dict[str, tuple[str, str]] = {
    "home": ("any", "-"),
    # universes
    "universes:list": ("any", "-"),
    "universes:create": ("-", "author*"),
    "universes:toml_import": ("author*", "author*"),
    "universes:detail": ("member", "-"),
    "universes:rename": ("author", "author"),
    "universes:delete": ("author", "author"),
    "universes:meta": ("member", "-"),
    "universes:meta_save": ("-", "author"),
    "universes:meta_edit": ("author", "-"),
    "universes:meta_delete": ("-", "author"),
    "universes:persona_save": ("-", "author"),
    "universes:opening_save": ("-", "author"),
    "universes:persona_portrait": ("member", "-"),
    "universes:missions": ("member", "-"),
    "universes:missions_universe": ("-", "author"),
    "universes:missions_table": ("-", "author"),
    "universes:missions_text": ("-", "author"),
    "universes:exchange": ("member", "-"),
    "universes:lore_import": ("-", "author"),
    "universes:export_toml": ("member", "-"),
    "universes:export_sillytavern": ("member", "-"),
    "universes:export_card": ("member", "-"),
    "universes:export_card_png": ("member", "-"),
    "universes:lore_list": ("member", "-"),
    "universes:lore_create": ("author", "author"),
    "universes:lore_bulk": ("-", "author"),
    "universes:lore_status": ("member", "-"),
    "universes:lore_deleted": ("member", "-"),
    "universes:lore_tester": ("member", "member"),
    "universes:lore_health": ("member", "-"),
    "universes:lore_detail": ("member", "-"),
    "universes:lore_row": ("member", "-"),
    "universes:lore_edit": ("author", "author"),
    "universes:lore_delete": ("author", "author"),
    "universes:lore_history": ("member", "-"),
    "universes:lore_restore": ("-", "author"),
    # saves
    "saves:list": ("any", "-"),
    "saves:create": ("player*", "player*"),
    "saves:import_transcript": ("player*", "player*"),
    "saves:import_locomo": ("player*", "player*"),
    "saves:import_save": ("player*", "player*"),
    "saves:detail": ("member", "-"),
    "saves:turn_append": ("-", "player"),
    "saves:timeline": ("member", "-"),
    "saves:turn_detail": ("member", "-"),
    "saves:turn_edit": ("player", "player"),
    "saves:rewind": ("player", "-"),
    "saves:rewind_preview": ("player", "-"),
    "saves:rewind_confirm": ("-", "player"),
    "saves:rewind_summary": ("player", "-"),
    "saves:narrate": ("-", "player"),
    "saves:narrator_prompt": ("member", "-"),
    "saves:narrator_draft": ("member", "-"),
    "saves:narrator_stream": ("-", "player"),
    "saves:narrator_regenerate": ("-", "player"),
    "saves:narrator_choose": ("-", "player"),
    "saves:narrator_discard": ("-", "player"),
    "saves:narrator_accept": ("-", "player"),
    "saves:narrator_snapshot": ("member", "-"),
    "saves:narrator_opening": ("-", "player"),
    "saves:narrator_impersonate": ("-", "player"),
    "saves:narrator_continue": ("-", "player"),
    "saves:narrator_stop": ("-", "player"),
    "saves:turn_undo": ("-", "player"),
    "saves:turn_retry": ("-", "player"),
    "saves:turn_swipe": ("-", "player"),
    "saves:draft_restore": ("-", "player"),
    "saves:play_settings": ("member", "player"),
    "saves:chapters": ("member", "-"),
    "saves:chapter_close": ("-", "player"),
    "saves:chapter_edit": ("-", "player"),
    "saves:fork": ("-", "player"),
    "saves:export": ("player", "-"),
    # memory inspector
    "memory:universe_replay": ("member", "-"),
    "memory:universe_tests": ("member", "-"),
    "memory:universe_test_save": ("-", "author"),
    "memory:universe_test_delete": ("-", "author"),
    "memory:universe_tests_run": ("-", "player"),
    "memory:playground": ("member", "-"),
    "memory:playground_record": ("-", "player"),
    "memory:why_not": ("member", "-"),
    "memory:facts": ("member", "-"),
    "memory:beliefs": ("member", "-"),
    "memory:belief_detail": ("member", "-"),
    "memory:mental_models": ("member", "-"),
    "memory:mental_models_refresh": ("-", "player"),
    "memory:context": ("member", "-"),
    "memory:knowledge": ("member", "-"),
    "memory:knowledge_character": ("member", "-"),
    "memory:presence_edit": ("-", "player"),
    "memory:reveal_create": ("-", "player"),
    "memory:reveal_delete": ("-", "player"),
    "memory:context_record": ("-", "player"),
    "memory:replay": ("member", "-"),
    "memory:jobs": ("member", "-"),
    "memory:job_detail": ("member", "-"),
    "memory:job_retry": ("-", "player"),
    "memory:jobs_retry_skipped": ("-", "player"),
    # API tokens (studio pages for the user's own tokens)
    "api_tokens:list": ("any", "-"),
    "api_tokens:create": ("-", "any"),
    "api_tokens:revoke": ("-", "own"),
}

ROLES = ["reader", "playtester", "author", "foreign_author", "outsider", "staff"]


def allowed(rule: str, role: str) -> bool:
    members = {"reader", "playtester", "author", "staff"}
    return {
        "any": True,
        "author*": role in {"author", "foreign_author", "staff"},
        "player*": role in {"playtester", "author", "foreign_author", "staff"},
        "member": role in members,
        "author": role in {"author", "staff"},
        "player": role in {"playtester", "author", "staff"},
        "own": role == "author",
    }[rule]


def refusal(rule: str, role: str) -> set[int]:
    """Statuses that count as a refusal: 404 when the user may not see the object at all."""
    if rule in {"member", "author", "player"} and role in {"foreign_author", "outsider"}:
        return {404}
    if rule == "own":
        return {404}
    return {403}


def walk(patterns, prefix="", namespace=""):
    for entry in patterns:
        if isinstance(entry, URLResolver):
            if str(entry.pattern).startswith(SKIP_PREFIXES):
                continue
            ns = f"{namespace}{entry.namespace}:" if entry.namespace else namespace
            yield from walk(entry.url_patterns, prefix + str(entry.pattern), ns)
        elif isinstance(entry, URLPattern):
            yield prefix + str(entry.pattern), f"{namespace}{entry.name}", entry


def routes():
    return [(route, name, pattern) for route, name, pattern in walk(get_resolver().url_patterns) if name not in PUBLIC]


def url_for(route: str, pattern: URLPattern, values: dict) -> str:
    path = "/" + route
    for name, converter in pattern.pattern.converters.items():
        kind = {"SlugConverter": "slug", "IntConverter": "int", "StringConverter": "str", "PathConverter": "path"}[
            type(converter).__name__
        ]
        path = path.replace(f"<{kind}:{name}>", str(values[name]))
    return path

"""Who may do what on every studio page and htmx action.

Every URL pattern of the studio (not the admin, not the API, which has its own table in
tests/api/test_permissions.py, not the memory proxy's `/v1/`, bearer-key only, whose 401 /
403 / 404 are in tests/proxy/test_errors.py) must appear in RULES with a rule for GET and for POST; the
test walks the URL configuration, so a new view fails the suite until its rule is written
here and holds. Each request runs in a savepoint that is rolled back, so a permitted
delete or rewind does not disturb the next request.

Roles: `reader` belongs to the universe but has no role; `playtester` belongs and is a
Playtester; `author` owns it and is an Author; `foreign_author` is an Author of nothing
here; `outsider` has no role and no membership; `staff` is a superuser.
"""
from __future__ import annotations

import pytest
from django.contrib.auth.models import Group, User
from django.db import transaction
from django.urls import URLPattern, URLResolver, get_resolver

from studio.api.services import api_token_create
from studio.memory.models import Job, Observation
from studio.roles import AUTHORS, PLAYTESTERS
from studio.universes.models import LoreRevision, UniverseMeta

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


def test_every_studio_url_has_a_rule():
    names = {name for _, name, _ in routes()}
    assert names == set(RULES), f"missing rules: {sorted(names - set(RULES))}; stale: {sorted(set(RULES) - names)}"


@pytest.fixture
def people(db, universe, author, playtester):
    reader = User.objects.create_user("reader", password="pw")
    universe.members.add(reader)
    foreign = User.objects.create_user("foreign", password="pw")
    foreign.groups.add(Group.objects.get_or_create(name=AUTHORS)[0])
    outsider = User.objects.create_user("nobody", password="pw")
    staff = User.objects.create_user("root", password="pw", is_staff=True, is_superuser=True)
    return {"reader": reader, "playtester": playtester, "author": author, "foreign_author": foreign, "outsider": outsider, "staff": staff}


@pytest.fixture
def objects(universe, game_save, author):
    meta = UniverseMeta.objects.get(universe=universe, key="belief_mission")
    revision = LoreRevision.objects.create(universe=universe, lore_entry=universe.lore_entries.get(entry_id="kael"), entry_id="kael", action="create", after={"title": "Kaël", "text": "x", "kind": "character", "keys": []})
    belief = Observation.objects.create(game_save=game_save, statement="Kaël owes money.", subject="Kaël", sources=[])
    job = Job.objects.create(kind="embed_turn", game_save=game_save, turn_id=1, status="failed", error="x")
    token, _ = api_token_create(user=author, name="engine")
    from studio.universes.services import persona_set

    from tests.universes.test_persona import png

    persona_set(universe=universe, name="Wren", description="", portrait=png())  # a real PNG: portraits are decoded
    from studio.saves.models import NarratorAlternative, NarratorDraft

    draft = NarratorDraft.objects.create(game_save=game_save, turn_id=game_save.current_turn + 1, player_input="look")
    NarratorAlternative.objects.create(draft=draft, number=1, status="done", text="You look.")
    from studio.memory.chapters.models import Chapter
    from studio.memory.knowledge.models import Reveal

    chapter = Chapter.objects.create(game_save=game_save, first_turn=1, last_turn=1, closed_turn=1, close_reason="playtester")
    reveal = Reveal.objects.create(game_save=game_save, turn_id=1, entry_id="kael", character="Mira")
    from studio.universes.memory_tests.services import memory_test_create

    memory_test_create(universe=universe, data={"name": "kael-known", "kind": "knows", "character": "Mira",
                                                "entry": "kael"})
    return {
        "draft_id": draft.pk, "number": 1, "chapter_id": chapter.pk, "name": "Kaël", "reveal_id": reveal.pk,
        "test_name": "kael-known",
        "slug": universe.slug, "save_id": game_save.save_id, "entry_id": "kael", "pk": meta.pk,
        "revision_id": revision.pk, "turn_id": 1, "observation_id": belief.pk, "job_id": job.pk, "token_id": token.pk,
    }


def url_for(route: str, pattern: URLPattern, values: dict) -> str:
    path = "/" + route
    for name, converter in pattern.pattern.converters.items():
        kind = {"SlugConverter": "slug", "IntConverter": "int", "StringConverter": "str", "PathConverter": "path"}[type(converter).__name__]
        path = path.replace(f"<{kind}:{name}>", str(values[name]))
    return path


@pytest.mark.parametrize("role", ROLES)
def test_each_role_gets_exactly_what_the_rules_say(client, people, objects, role, monkeypatch):
    # Work that would leave the process (jobs, vector deletes) is not what is tested here.
    monkeypatch.setattr("django.db.transaction.on_commit", lambda func, using=None, robust=False: None)
    client.force_login(people[role])
    wrong = []
    for route, name, pattern in routes():
        get_rule, post_rule = RULES[name]
        path = url_for(route, pattern, objects)
        for method, rule in (("get", get_rule), ("post", post_rule)):
            with transaction.atomic():
                response = getattr(client, method)(path)
                transaction.set_rollback(True)
            status = response.status_code
            if rule == "-":
                # Not accepted: 405 (or refused before the method check for those who may not see it).
                if status not in {405, 403, 404}:
                    wrong.append(f"{method.upper()} {path}: {status}, expected 405")
                continue
            if allowed(rule, role):
                if status in {401, 403, 404, 405} or (status == 302 and "/accounts/login/" in response["Location"]):
                    wrong.append(f"{method.upper()} {path} ({rule}): refused with {status}")
            elif status not in refusal(rule, role):
                wrong.append(f"{method.upper()} {path} ({rule}): {status}, expected {sorted(refusal(rule, role))}")
    assert not wrong, f"{role}:\n" + "\n".join(wrong)

"""Who may do what on every studio page and htmx action.

Every URL pattern of the studio (not the admin, not the API, which has its own table in
tests/api/test_permissions.py, not the memory proxy's `/v1/`, bearer-key only, whose 401 /
403 / 404 are in tests/proxy/test_errors.py) must appear in RULES (tests/support/routes.py,
shared with the escaping test) with a rule for GET and for POST; the test walks the URL
configuration, so a new view fails the suite until its rule is written there and holds. Each
request runs in a savepoint that is rolled back, so a permitted delete or rewind does not
disturb the next request.

Roles: `reader` belongs to the universe but has no role; `playtester` belongs and is a
Playtester; `author` owns it and is an Author; `foreign_author` is an Author of nothing
here; `outsider` has no role and no membership; `staff` is a superuser.
"""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group, User
from django.db import transaction

from studio.api.services import api_token_create
from studio.memory.models import Job, Observation
from studio.roles import AUTHORS
from studio.universes.models import LoreRevision
from studio.world.models import UniverseMeta

from tests.support.images import png
from tests.support.routes import ROLES, RULES, allowed, refusal, routes, url_for


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
    return {
        "reader": reader,
        "playtester": playtester,
        "author": author,
        "foreign_author": foreign,
        "outsider": outsider,
        "staff": staff,
    }


@pytest.fixture
def objects(universe, game_save, author):
    meta = UniverseMeta.objects.get(universe=universe, key="belief_mission")
    revision = LoreRevision.objects.create(
        universe=universe,
        lore_entry=universe.lore_entries.get(entry_id="kael"),
        entry_id="kael",
        action="create",
        after={"title": "Kaël", "text": "x", "kind": "character", "keys": []},
    )
    belief = Observation.objects.create(game_save=game_save, statement="Kaël owes money.", subject="Kaël", sources=[])
    job = Job.objects.create(kind="embed_turn", game_save=game_save, turn_id=1, status="failed", error="x")
    token, _ = api_token_create(user=author, name="engine")
    from studio.universes.services import persona_set

    persona_set(universe=universe, name="Wren", description="", portrait=png())  # a real PNG: portraits are decoded
    from studio.saves.models import NarratorAlternative, NarratorDraft

    draft = NarratorDraft.objects.create(game_save=game_save, turn_id=game_save.current_turn + 1, player_input="look")
    NarratorAlternative.objects.create(draft=draft, number=1, status="done", text="You look.")
    from studio.memory.chapters.models import Chapter
    from studio.memory.knowledge.models import Reveal

    chapter = Chapter.objects.create(
        game_save=game_save, first_turn=1, last_turn=1, closed_turn=1, close_reason="playtester"
    )
    reveal = Reveal.objects.create(game_save=game_save, turn_id=1, entry_id="kael", character="Mira")
    from studio.universes.memory_tests.services import memory_test_create

    memory_test_create(
        universe=universe, data={"name": "kael-known", "kind": "knows", "character": "Mira", "entry": "kael"}
    )
    return {
        "draft_id": draft.pk,
        "number": 1,
        "chapter_id": chapter.pk,
        "name": "Kaël",
        "reveal_id": reveal.pk,
        "test_name": "kael-known",
        "slug": universe.slug,
        "save_id": game_save.save_id,
        "entry_id": "kael",
        "pk": meta.pk,
        "revision_id": revision.pk,
        "turn_id": 1,
        "observation_id": belief.pk,
        "job_id": job.pk,
        "token_id": token.pk,
    }


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

"""Every save page and action refuses an anonymous visitor and a user of another group.

The test walks the `saves:` and `memory:` URL patterns that take a `save_id`, so a page
added later is covered the moment it is routed. A logged-in member of the universe without
the Playtester or Author role may read, but is refused every playtest action (403).
"""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group, User
from django.urls import URLPattern, URLResolver, get_resolver, reverse

from studio.memory.models import Job, JobKind, JobStatus, Observation
from studio.roles import PLAYTESTERS
from studio.world.models import Event, Save, Universe

# Routes that change a save (POST) or belong to a playtest flow (rewind pages).
PLAYTEST_ROUTES = {
    "saves:turn_append": "post",
    "saves:turn_edit": "post",
    "saves:rewind": "get",
    "saves:rewind_preview": "get",
    "saves:rewind_confirm": "post",
    "saves:rewind_summary": "get",
    "saves:fork": "post",
    "saves:export": "get",
    "memory:mental_models_refresh": "post",
    "memory:presence_edit": "post",
    "memory:reveal_create": "post",
    "memory:reveal_delete": "post",
    "memory:job_retry": "post",
    "memory:jobs_retry_skipped": "post",
    "memory:playground_record": "post",
    "memory:context_record": "post",
    "saves:narrate": "post",
    "saves:narrator_stream": "post",
    "saves:narrator_regenerate": "post",
    "saves:narrator_choose": "post",
    "saves:narrator_discard": "post",
    "saves:narrator_accept": "post",
    "saves:narrator_opening": "post",
    "saves:narrator_impersonate": "post",
    "saves:narrator_continue": "post",
    "saves:narrator_stop": "post",
    "saves:turn_undo": "post",
    "saves:turn_retry": "post",
    "saves:turn_swipe": "post",
    "saves:draft_restore": "post",
    "saves:play_settings": "post",
    "saves:chapter_close": "post",
    "saves:chapter_edit": "post",
}


def save_routes():
    """Yield (name, converters) for every saves:/memory: route that takes a save_id."""
    for namespace in ("saves", "memory"):
        resolver = get_resolver()
        for entry in resolver.url_patterns:
            if isinstance(entry, URLResolver) and entry.namespace == namespace:
                for pattern in entry.url_patterns:
                    if isinstance(pattern, URLPattern) and "save_id" in pattern.pattern.converters:
                        yield f"{namespace}:{pattern.name}", set(pattern.pattern.converters)


@pytest.fixture
def belief(game_save):
    return Observation.objects.create(
        game_save=game_save, statement="Kaël owes Mira.", subject="Kaël", sources=[{"fact_id": 1, "turn_id": 1}]
    )


def url_for(name: str, converters: set[str], game_save: Save, belief: Observation) -> str:
    kwargs = {"save_id": game_save.save_id}
    if "turn_id" in converters:
        kwargs["turn_id"] = 1
    if "observation_id" in converters:
        kwargs["observation_id"] = belief.pk
    if "job_id" in converters:
        kwargs["job_id"] = Job.objects.get_or_create(
            kind=JobKind.EMBED_TURN, game_save=game_save, turn_id=1, defaults={"status": JobStatus.FAILED}
        )[0].pk
    if "draft_id" in converters:
        from studio.saves.models import NarratorAlternative, NarratorDraft

        draft, created = NarratorDraft.objects.get_or_create(game_save=game_save, turn_id=game_save.current_turn + 1)
        if created:
            NarratorAlternative.objects.create(draft=draft, number=1, status="done", text="You look.")
        kwargs["draft_id"] = draft.pk
    if "number" in converters:
        kwargs["number"] = 1
    if "name" in converters:  # a character's knowledge timeline
        kwargs["name"] = "Kaël"
    if "reveal_id" in converters:
        from studio.memory.knowledge.models import Reveal

        kwargs["reveal_id"] = Reveal.objects.get_or_create(
            game_save=game_save, turn_id=1, entry_id="kael", character="Mira"
        )[0].pk
    if "chapter_id" in converters:
        from studio.memory.chapters.models import Chapter

        kwargs["chapter_id"] = Chapter.objects.get_or_create(
            game_save=game_save, first_turn=1, last_turn=1, closed_turn=1, defaults={"close_reason": "playtester"}
        )[0].pk
    return reverse(name, kwargs=kwargs)


def all_save_urls(game_save, belief):
    routes = list(save_routes())
    assert len(routes) >= 15, routes  # the walk found the playtesting pages
    return [(name, url_for(name, conv, game_save, belief)) for name, conv in routes]


@pytest.mark.django_db
def test_anonymous_is_sent_to_login_for_every_save_url(client, game_save, belief):
    for name, url in all_save_urls(game_save, belief):
        for method in ("get", "post"):
            response = getattr(client, method)(url, HTTP_HX_REQUEST="true")
            assert response.status_code in (302, 405), f"{method} {name}: {response.status_code}"
            if response.status_code == 302:
                assert response["Location"].startswith("/accounts/login/"), name


@pytest.mark.django_db
def test_user_of_another_group_gets_404_for_every_save_url(client, game_save, belief):
    other_universe = Universe.objects.create(name="Elsewhere", slug="elsewhere")
    stranger = User.objects.create_user("stranger", password="pw")
    stranger.groups.add(Group.objects.get_or_create(name=PLAYTESTERS)[0])
    other_universe.members.add(stranger)
    client.force_login(stranger)
    events_before = Event.objects.count()
    for name, url in all_save_urls(game_save, belief):
        for method in ("get", "post"):
            data = (
                {"turn": 1, "confirm": "yes", "from_turn": 3, "narrative": "x", "name": "f"}
                if method == "post"
                else None
            )
            response = getattr(client, method)(url, data)
            assert response.status_code in (404, 405), f"{method} {name}: {response.status_code}"
            response = getattr(client, method)(url, data, HTTP_HX_REQUEST="true")
            assert response.status_code in (404, 405), f"htmx {method} {name}: {response.status_code}"
    assert Event.objects.count() == events_before
    assert Save.objects.count() == 1
    game_save.refresh_from_db()
    assert game_save.current_turn == 3


@pytest.mark.django_db
def test_member_without_role_may_read_but_not_act(client, universe, game_save, belief):
    reader = User.objects.create_user("reader", password="pw")
    universe.members.add(reader)
    client.force_login(reader)
    for name, url in all_save_urls(game_save, belief):
        method = PLAYTEST_ROUTES.get(name)
        if method is None:
            response = client.get(url)
            assert response.status_code == 200, f"{name}: {response.status_code}"
            continue
        data = {"turn": 1, "confirm": "yes", "from_turn": 3, "narrative": "new text", "name": "f"}
        response = client.post(url, data) if method == "post" else client.get(url, {"turn": 1})
        assert response.status_code == 403, f"{name}: {response.status_code}"
    game_save.refresh_from_db()
    assert game_save.current_turn == 3
    assert Event.objects.get(game_save=game_save, turn_id=1).narrative == "Turn 1 text."
    assert list(Job.objects.values_list("status", flat=True)) == [JobStatus.FAILED]  # not retried
    assert Save.objects.count() == 1
    for name in ("saves:create", "saves:import_transcript", "saves:import_locomo", "saves:import_save"):
        assert client.get(reverse(name)).status_code == 403, name

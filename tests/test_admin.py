"""Every admin changelist and change form renders with data; big changelists stay cheap."""

import pytest
from axes.models import AccessAttempt, AccessFailureLog
from django.contrib import admin
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from studio.api.services import api_token_create
from studio.memory.models import (
    Fact,
    Job,
    LLMCall,
    MentalModel,
    Observation,
    RecordedQuery,
    VectorCorpusChange,
    VectorCorpusVersion,
)
from studio.saves.models import NarratorSnapshot
from studio.world.models import StateCache
from studio.universes.models import LoreRevision


@pytest.fixture
def populated(game_save, universe, staff_user):
    StateCache.objects.create(game_save=game_save, turn_id=1, state={"where": "Port Vey"})
    Fact.objects.create(game_save=game_save, turn_id=1, statement="Kaël docked at Port Vey.", entities=["Kaël"])
    Observation.objects.create(
        game_save=game_save, statement="Kaël trusts nobody.", subject="Kaël", sources=[{"fact_id": 1, "turn_id": 1}]
    )
    MentalModel.objects.create(game_save=game_save, subject="Kaël", summary="A wary smuggler.")
    RecordedQuery.objects.create(game_save=game_save, turn_id=1, query_text="who is Kaël")
    VectorCorpusVersion.objects.create(scope_id=game_save.save_id, version=3)
    VectorCorpusChange.objects.create(scope_id=game_save.save_id, version=3, added=["a1"], removed=["r1"])
    LoreRevision.objects.create(universe=universe, entry_id="kael", action="create", after={"title": "Kaël"})
    job = Job.objects.create(kind="embed_turn", game_save=game_save, turn_id=1, status="failed", error="boom")
    LLMCall.objects.create(
        game_save=game_save, job=job, operation="extract", model="m", prompt_tokens=10, completion_tokens=5
    )
    api_token_create(user=staff_user, name="engine")
    NarratorSnapshot.objects.create(
        game_save=game_save, turn_id=1, player_input="look", model="m", context={"items": []}
    )
    from django.utils import timezone

    from studio.saves.memory_tests.models import MemoryTestResult
    from studio.universes.memory_tests.services import memory_test_create

    memory_test_create(
        universe=universe, data={"name": "kael-knows", "kind": "knows", "character": "Kaël", "entry": "kael"}
    )
    MemoryTestResult.objects.create(
        game_save=game_save,
        turn_id=1,
        name="kael-knows",
        kind="knows",
        verdict="pass",
        definition={"name": "kael-knows"},
        summary="Kaël knows it.",
        ran_at=timezone.now(),
    )
    AccessAttempt.objects.create(
        username="mira",
        ip_address="203.0.113.7",
        user_agent="ua",
        http_accept="*/*",
        path_info="/accounts/login/",
        get_data="",
        post_data="",
        failures_since_start=5,
    )
    AccessFailureLog.objects.create(
        username="mira",
        ip_address="203.0.113.7",
        user_agent="ua",
        http_accept="*/*",
        path_info="/accounts/login/",
        locked_out=True,
    )
    return game_save


def registered_models():
    return sorted(admin.site._registry, key=lambda m: m._meta.label)


@pytest.mark.parametrize("model", registered_models(), ids=lambda m: m._meta.label)
def test_changelist_and_change_form_render(client, populated, staff_user, model):
    client.force_login(staff_user)
    opts = model._meta
    changelist = reverse(f"admin:{opts.app_label}_{opts.model_name}_changelist")
    response = client.get(changelist)
    assert response.status_code == 200, changelist
    obj = model._default_manager.first()
    assert obj is not None, f"fixture has no {opts.label} row"
    change = reverse(f"admin:{opts.app_label}_{opts.model_name}_change", args=[obj.pk])
    response = client.get(change)
    assert response.status_code == 200, change
    # Search works on every model that declares search fields.
    if admin.site._registry[model].search_fields:
        assert client.get(changelist, {"q": "zzz-no-match"}).status_code == 200


def test_core_models_are_all_registered():
    labels = {m._meta.label for m in admin.site._registry}
    for label in [
        "world.Universe",
        "world.UniverseMeta",
        "world.LoreEntry",
        "world.Save",
        "world.Event",
        "world.StateCache",
        "memory.Fact",
        "memory.Observation",
        "memory.MentalModel",
    ]:
        assert label in labels


def fact_changelist_queries(client, game_save, count):
    Fact.objects.bulk_create(
        Fact(game_save=game_save, turn_id=i % 500 + 1, statement=f"fact {i}", entities=["Kaël"]) for i in range(count)
    )
    with CaptureQueriesContext(connection) as ctx:
        response = client.get(reverse("admin:memory_fact_changelist"))
    assert response.status_code == 200
    return len(ctx.captured_queries)


def test_fact_changelist_query_count_does_not_grow_with_rows(client, game_save, staff_user):
    client.force_login(staff_user)
    small = fact_changelist_queries(client, game_save, 50)
    large = fact_changelist_queries(client, game_save, 10_000)
    # 10,050 facts list with the same number of queries as 50: no N+1, paginated.
    assert large == small
    assert large <= 12

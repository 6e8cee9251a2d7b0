"""The operator controls spending: the upstream models the proxy may use, caps on `max_tokens` and
`n`, and a spend guard per user and per day on top of the per-save one. Over any of them a
request is refused before anything is written and before any upstream call. Before, the client
picked the model (`axiom/<id>/gpt-4-32k-expensive` reached the upstream), `max_tokens: 100000`
and `n: 8` passed through, and a key holder making saves had no per-user limit."""

from __future__ import annotations

import pytest

from studio.memory.models import LLMCall
from studio.proxy.models import ProxyChat
from studio.saves.models import NarratorDraft
from studio.world.models import Event, Save
from studio.saves.services import save_create
from tests.proxy.frontends import sillytavern

pytestmark = pytest.mark.django_db

URL = "/v1/chat/completions"


def nothing_happened(upstream, relayed_before: int):
    assert len(upstream.relayed) == relayed_before
    assert not NarratorDraft.objects.exists() and not Event.objects.filter(game_save__proxy_chat__isnull=False).exists()


@pytest.mark.parametrize(
    "fields, code, param",
    [
        ({"model": "MODEL/gpt-4-32k-expensive"}, "model_not_allowed", "model"),
        ({"max_tokens": 100_000}, "over_limit", "max_tokens"),
        ({"max_completion_tokens": 5000}, "over_limit", "max_completion_tokens"),
        ({"n": 8}, "over_limit", "n"),
    ],
)
def test_over_the_operators_limits_is_refused_before_anything(proxy, upstream, play_save, fields, code, param):
    body = {**sillytavern(f"axiom/{play_save.save_id}/test-model", [], "Hi.", stream=False), **fields}
    body["model"] = body["model"].replace("MODEL", f"axiom/{play_save.save_id}")
    response = proxy.post(URL, body)
    assert response.status_code == 400, response.content
    error = response.json()["error"]
    assert (error["code"], error["param"]) == (code, param)
    nothing_happened(upstream, 0)
    assert not LLMCall.objects.exists()
    # The same through a universe's model name: no save is made either.
    body["model"] = body["model"].replace(f"axiom/{play_save.save_id}", "axiom/u/test-world")
    assert proxy.post(URL, body).status_code == 400 and not ProxyChat.objects.exists()


def test_the_caps_default_to_the_narrators_and_fill_an_absent_max_tokens(proxy, upstream, play_save, settings):
    settings.AXIOM_LLM_MAX_TOKENS = 400
    body = sillytavern(f"axiom/{play_save.save_id}/test-model", [], "Hi.", stream=False)
    del body["max_tokens"]
    assert proxy.post(URL, body).status_code == 200
    assert upstream.relayed[-1]["max_tokens"] == 400  # the narrator's cap, sent for an open-ended request
    assert proxy.post(URL, {**body, "max_tokens": 401}).status_code == 400
    settings.AXIOM_PROXY_MAX_TOKENS, settings.AXIOM_PROXY_MAX_N = 2000, 3
    assert proxy.post(URL, {**body, "max_tokens": 2000, "n": 3}).status_code == 200
    settings.AXIOM_PROXY_MODELS = ["*"]
    assert proxy.post(URL, {**body, "model": f"axiom/{play_save.save_id}/any-model"}).status_code == 200
    assert upstream.relayed[-1]["model"] == "any-model"


def test_a_users_daily_spend_is_guarded_across_saves(proxy, make_api, upstream, universe, settings, playtester):
    settings.AXIOM_LLM_CALLS_PER_USER_DAY = 2
    saves = [save_create(universe=universe, name=f"Save {n}") for n in range(3)]
    for game_save in saves[:2]:
        assert (
            proxy.post(URL, sillytavern(f"axiom/{game_save.save_id}/test-model", [], "Hi.", stream=False)).status_code
            == 200
        )
    relayed = len(upstream.relayed)
    response = proxy.post(URL, sillytavern(f"axiom/{saves[2].save_id}/test-model", [], "Hi.", stream=False))
    assert response.status_code == 429 and response.json()["error"]["code"] == "spend_limit"
    assert 80_000 < int(response["Retry-After"]) <= 86_400  # when the first of the day's calls leaves the window
    assert "your key's user used 2 LLM calls in the last 24 hours (cap 2)" in response.json()["error"]["message"]
    assert len(upstream.relayed) == relayed and not NarratorDraft.objects.filter(game_save=saves[2]).exists()
    refused = LLMCall.objects.get(refused=True)
    assert (refused.user, refused.game_save, refused.prompt_tokens) == (playtester, saves[2], 0)
    # Refusals are not spent: the guard still counts 2; a universe chat is not made past the cap either.
    assert proxy.post(URL, sillytavern("axiom/u/test-world/test-model", [], "Hi.", stream=False)).status_code == 429
    assert not ProxyChat.objects.exists() and Save.objects.count() == 3
    # Counted on the save's Jobs page.
    from django.test import Client

    page = Client()
    page.force_login(playtester)
    html = page.get(f"/memory/{saves[2].save_id}/jobs/").content.decode()
    assert 'id="spending"' in html and "2 calls of 2" in html and 'data-refused="1"' in html
    # Another user has their own day.
    from django.contrib.auth.models import Group, User

    other = User.objects.create_user("other", password="pw")
    other.groups.add(Group.objects.get(name="Playtesters"))
    universe.members.add(other)
    assert (
        make_api(other)
        .post(URL, sillytavern(f"axiom/{saves[2].save_id}/test-model", [], "Hi.", stream=False))
        .status_code
        == 200
    )


def test_the_tokens_cap_per_day(proxy, upstream, play_save, settings):
    settings.AXIOM_LLM_TOKENS_PER_USER_DAY = 15  # the scripted upstream reports 10 + 5 tokens a call
    body = sillytavern(f"axiom/{play_save.save_id}/test-model", [], "Hi.", stream=False)
    assert proxy.post(URL, body).status_code == 200
    response = proxy.post(URL, body)
    assert response.status_code == 429 and "LLM tokens in the last 24 hours" in response.json()["error"]["message"]


def test_a_request_checks_each_spend_guard_once(proxy, upstream, play_save, settings):
    """The save's hour and the user's day are read before anything is written; the relay does not read them again."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    settings.AXIOM_LLM_CALLS_PER_HOUR = settings.AXIOM_LLM_CALLS_PER_USER_DAY = 50
    body = sillytavern(f"axiom/{play_save.save_id}/test-model", [], "Hi.", stream=False)
    with CaptureQueriesContext(connection) as queries:
        assert proxy.post(URL, body).status_code == 200
    guards = [q["sql"] for q in queries.captured_queries if "memory_llmcall" in q["sql"] and "COUNT(" in q["sql"]]
    assert len(guards) == 2, guards

"""One path builds what the narrator reads: the narrator, the Context viewer and the API agree.

Tried as a new user would: a new universe with a player character and an imported
Character Card, a living save with a few turns and their facts. For the same player input
the Context viewer, `POST /api/v1/saves/<id>/context` and the narrator's prompt carry the
same items and tokens; `{{user}}` is the player character and `{{char}}` the card's
character everywhere (the key tester included); turns played with the narrator record
their memory queries for Lore replay.
"""

from __future__ import annotations

import json

import pytest
from django.urls import reverse

from studio.memory.lore.activation_state import lore_activation_for_turn, lore_macros_for
from studio.memory.models import Fact, RecordedQuery
from studio.memory.recall.replay import replay_recorded_queries
from studio.saves.models import NarratorDraft
from studio.world.models import Event
from studio.saves.narrator import services as narrator_services
from studio.saves.narrator.prompt import build_narrator_prompt
from studio.saves.services import save_create
from studio.universes import services
from studio.universes.interchange import character_card
from studio.universes.lore_tester import lore_key_test
from tests.support.cards import DATA, v2_card
from tests.support.narration import stream_all

pytestmark = pytest.mark.django_db

PLAYER = "Ilya Voss"
CARD_NAME = "Mara Quill"
INPUT = "Ilya Voss asks Mara Quill about the lamp."
TURNS = [
    ("I climb the lighthouse stairs.", "Ilya Voss climbs the lighthouse stairs. Mara Quill trims the lamp wick."),
    ("I ask about the storm.", "Mara Quill says the storm will break the lamp glass before dawn."),
]


@pytest.fixture(autouse=True)
def no_lore_jobs(monkeypatch):
    monkeypatch.setattr("studio.universes.services.lore.schedule_lore_sync", lambda **kw: None)


@pytest.fixture
def lighthouse(author, playtester, vector_memory):
    """A new universe with a player character and an imported card; a living save with two turns."""
    universe = services.universe_create(user=author, name="Lighthouse")
    universe.members.add(playtester)
    services.meta_set(universe=universe, key="player_character", value=PLAYER)
    data = {
        **DATA,
        "name": CARD_NAME,
        "description": "{{char}}, a young lighthouse-keeper's daughter, keeps the lamp for {{user}}.",
    }
    book = character_card.parse_card(json.dumps(v2_card(data)).encode(), filename="mara.json")
    services.card_import(universe=universe, user=author, book=book)
    services.lore_entry_create(
        universe=universe,
        user=author,
        title="Player's oath",
        keys=["{{user}}"],
        text="{{user}} swore to keep the light.",
    )
    game_save = save_create(universe=universe, name="Night watch", memory_mode="living")
    for turn_id, (player_input, narrative) in enumerate(TURNS, start=1):
        Event.objects.create(game_save=game_save, turn_id=turn_id, player_input=player_input, narrative=narrative)
        vector_memory.embed_chunk(game_save.save_id, turn_id, narrative)
    game_save.current_turn = len(TURNS)
    game_save.save()
    for turn_id, statement, entity in [
        (1, "Ilya Voss climbed the lighthouse stairs.", PLAYER),
        (1, "Mara Quill trims the lamp wick.", CARD_NAME),
        (2, "Mara Quill expects the storm to break the lamp glass.", CARD_NAME),
        (2, "Ilya Voss asked about the storm.", PLAYER),
    ]:
        Fact.objects.create(game_save=game_save, turn_id=turn_id, statement=statement, entities=[entity])
    vector_memory.sync_lore(
        game_save.save_id,
        [{"entry_id": e.entry_id, "title": e.title, "text": e.text} for e in universe.lore_entries.all()],
    )
    return game_save


def shape(items) -> list[tuple]:
    rows = [i if isinstance(i, dict) else i.__dict__ for i in items]
    return [(i["layer"], i["text"], i["tokens"], i["included"]) for i in rows]


def test_viewer_api_and_narrator_read_the_same_context(lighthouse, client, playtester, make_api):
    narrator_memory = build_narrator_prompt(game_save=lighthouse, player_input=INPUT).memory
    client.force_login(playtester)
    viewer = client.get(reverse("memory:context", args=[lighthouse.save_id]), {"q": INPUT}).context["memory_context"]
    api = make_api(playtester).post(f"/api/v1/saves/{lighthouse.save_id}/context", {"query_text": INPUT}).json()

    assert shape(viewer.items) == shape(narrator_memory.items) == shape(api["items"])
    assert viewer.used_tokens == narrator_memory.used_tokens == api["used_tokens"]
    assert viewer.subjects == narrator_memory.subjects == api["subjects"] == ["ilya voss", "mara quill"]
    facts = [i for i in viewer.items if i.layer == "fact"]
    assert len(facts) == 4 and not any("No character in focus" in note for note in viewer.notes)


def test_char_is_the_cards_character_and_user_the_player(lighthouse):
    prompt = build_narrator_prompt(game_save=lighthouse, player_input=INPUT)
    card = next(i for i in prompt.memory.items if i.ref.get("entry_id") and i.text.startswith(CARD_NAME))
    assert "Mara Quill, a young lighthouse-keeper's daughter, keeps the lamp for Ilya Voss." in card.text
    assert "Ilya Voss, a young lighthouse-keeper's" not in prompt.user
    assert prompt.memory.macros == {"user": PLAYER, "char": CARD_NAME}
    # The oath's key is {{user}}: play activates it when the player is named...
    oath = next(i for i in prompt.memory.items if i.text.startswith("Player's oath"))
    assert oath.why.get("activation") == "key" and oath.text == "Player's oath: Ilya Voss swore to keep the light."


def test_the_key_tester_fills_macros_as_play_does(lighthouse):
    universe = lighthouse.universe
    for save in (None, lighthouse):
        result = lore_key_test(universe=universe, text=INPUT, save=save)
        assert "players-oath" in {row.entry_id for row in result.included}
    # As turn N of the save, the tester activates what play records for that input.
    played, _extra = lore_activation_for_turn(save=lighthouse, pending_input=INPUT, macros=lore_macros_for(lighthouse))
    tested = lore_key_test(universe=universe, text=INPUT, save=lighthouse)
    assert [row.entry_id for row in tested.included] == list(played.activated_ids)


def test_narrated_turns_record_their_queries_for_lore_replay(lighthouse, client, playtester, narrator):
    client.force_login(playtester)
    for number in range(2):
        draft = narrator_services.narrator_draft_create(game_save=lighthouse, player_input=f"{INPUT} ({number})")
        stream_all(client, lighthouse, draft)
        narrator_services.narrator_accept(draft=NarratorDraft.objects.get(pk=draft.pk))
        lighthouse.refresh_from_db()
    recorded = list(RecordedQuery.objects.filter(game_save=lighthouse).order_by("turn_id", "id"))
    # Two vector queries a turn (narrative and lore), recorded at the turn they were asked at.
    assert [(r.turn_id, r.params["source"]) for r in recorded] == [(2, "narrator")] * 2 + [(3, "narrator")] * 2
    assert {r.params.get("exclude_chunk_type") for r in recorded} == {"lore", None}
    assert all(r.result_ids for r in recorded)
    report = replay_recorded_queries(game_save=lighthouse)
    assert len(report.queries) == 4 and not report.changed


def test_lore_health_replays_with_the_macros_play_uses(lighthouse):
    from studio.universes.lore_health import lore_health

    report = lore_health(universe=lighthouse.universe, saves=[lighthouse])
    # Turn 1's narration names Ilya Voss: the {{user}} key fired in play, so it is not "never activated".
    assert "players-oath" not in {row["entry_id"] for row in report.never_activated}

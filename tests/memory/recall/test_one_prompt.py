"""One context, one prompt: the five readers of the memory print the renderer's text, byte for byte.

A harbour save with every layer in it (constant lore, a closed chapter's summary, a mental
model, the recent turns, a belief, facts, narrative memory, activated lore) and who knows what
(presence, secrets): for the same save, turn, action and point of view, the Console's narrator
(and the API's narrate, streamed or not), the narrator's prompt preview, the Context viewer,
the API's context `text` and the memory proxy give the same memory text. And on every layer,
every item no character on scene knows carries its `[narrator-only]` mark in that text.
"""

from __future__ import annotations

import html
import json
import re

import pytest
from django.urls import reverse

from studio.memory.chapters.services import chapter_summary_edit, chapters_close_at
from studio.memory.facts import Fact, insert_facts
from studio.memory.models import MentalModel, Observation
from studio.memory.recall.context import next_turn_context
from studio.memory.recall.layout import LAYERS
from studio.memory.recall.query_params import ContextParams
from studio.proxy.services import MEMORY_HEADING, NOTE_HEADING
from studio.saves.narrator import services as narrator_services
from studio.saves.services import turn_append
from tests.llm_server import user_prompt

pytestmark = pytest.mark.django_db

ACTION = "I ask Mira about the map and the ledger."
TURNS = [  # (input, narrative, who the game says is present, place): Ash, the player, acts in every turn with an input
    ("I greet Mira and Kael on the dock.", "Mira waves; Kael counts his debts aloud.", ["Mira", "Kael"], "dock"),
    ("", "In the chapel Ivo shows Kael the map he hid behind the altar.", ["Kael", "Ivo"], "chapel"),
    ("I walk back to the dock.", "The tide is low; Mira mends a net.", ["Mira"], "dock"),
    ("I help Mira with the net.", "Mira hums while you knot the mesh.", ["Mira"], "dock"),
    ("", "Far off, Kael and Ivo argue over the map by lamplight.", ["Kael", "Ivo"], "tower"),
    ("I find Mira at the harbour office.", "Mira looks up from the ledger she should not have.", ["Mira"], "office"),
]


@pytest.fixture
def harbour(living, no_runner, vector_memory):
    """Six turns of the `cast` universe (Ash the player; the ledger known by Kael alone), every layer filled."""
    universe = living.universe
    universe.lore_entries.create(
        entry_id="drowned-bell",
        title="The drowned bell",
        constant=True,
        known_by=[],
        text="A bell rings under the harbour when the dead are restless.",
    )
    universe.meta.create(key="context_share_chapter", value="4")  # the recent turns: the last two only
    universe.meta.create(key="chapter_on_scene_change", value="false")  # one chapter, closed by hand below
    for _number, (player_input, narrative, present, place) in enumerate(TURNS, start=1):
        turn_append(
            game_save=living,
            player_input=player_input,
            narrative=narrative,
            state={"present": present, "location": place},
        )
    chapter = chapters_close_at(game_save=living, last_turn=3, reason="playtester")
    chapter_summary_edit(chapter=chapter, text="Ash greets the harbour; Ivo and Kael hide a map in the chapel.")
    (map_fact,) = insert_facts(living.save_id, 2, [Fact("Ivo hid the map behind the altar.", entities=["Ivo"])])
    insert_facts(living.save_id, 1, [Fact("Kael owes Mira forty crowns.", entities=["Kael", "Mira"])])
    insert_facts(living.save_id, 5, [Fact("Mira was seen at the tower.", entities=["Mira"])])
    Observation.objects.create(
        game_save=living, statement="Mira wants the map.", subject="Mira", sources=[{"fact_id": map_fact, "turn_id": 2}]
    )
    MentalModel.objects.create(game_save=living, subject="Mira", summary="Mira keeps what she finds.")
    vector_memory.embed_chunks(living.save_id, [{"turn_id": n, "text": t[1]} for n, t in enumerate(TURNS, start=1)])
    vector_memory.sync_lore(
        living.save_id,
        [{"entry_id": e.entry_id, "title": e.title, "text": e.text} for e in universe.lore_entries.all()],
    )
    living.refresh_from_db()
    return living


def _pre(page: str, element_id: str | None = None) -> str:
    """The text of a <pre> (by id, else the context viewer's) as the browser shows it."""
    pattern = rf'<pre class="wrap" id="{element_id}">(.*?)</pre>' if element_id else r'<pre class="wrap">(.*?)</pre>'
    return html.unescape(re.search(pattern, page, flags=re.S).group(1))


def _memory_of(user: str) -> str:
    """The memory of a narrator user message: everything before the player's action."""
    return user.split("\n\n## The player's action", 1)[0]


def _proxy_memory(messages: list[dict]) -> str:
    """The memory the proxy placed: its block after the system prompts, then its note after the chat."""
    parts = [m["content"] for m in messages if m["role"] == "system" and m["content"].startswith(MEMORY_HEADING)]
    return "\n\n".join(p.split("\n", 1)[1] for p in parts)


def _chat(save) -> dict:
    """A front end's request for ACTION whose chat carries the save's last turn (it starts there)."""
    last = TURNS[-1]
    return {
        "model": f"axiom/{save.save_id}/test-model",
        "messages": [
            {"role": "system", "content": "You are the narrator of an interactive story in a harbour town."},
            {"role": "user", "content": last[0]},
            {"role": "assistant", "content": last[1]},
            {"role": "user", "content": ACTION},
        ],
    }


def test_the_five_paths_give_byte_identical_memory_text(harbour, client, playtester, make_api, narrator):
    save, api = harbour, make_api(playtester)
    client.force_login(playtester)
    # The API's context at the narrator's budget (its own default is 1,200): the reference text.
    reference = api.post(f"/api/v1/saves/{save.save_id}/context", {"query_text": ACTION, "token_budget": 2000}).json()
    text = reference["text"]
    assert "[narrator-only]" in text and "## Recent turns" in text and "## On scene" in text
    # 1. The Console's narrator: what the model was sent.
    draft = narrator_services.narrator_draft_create(game_save=save, player_input=ACTION)
    b"".join(client.post(reverse("saves:narrator_stream", args=[save.save_id, draft.pk, 1])).streaming_content)
    console = user_prompt(narrator.server.requests_for("narrate")[-1])
    # ... the API's narrate, whole and streamed.
    narrated = api.post(f"/api/v1/saves/{save.save_id}/narrate", {"player_input": ACTION}).json()["prompt"]["user"]
    b"".join(
        api.post(f"/api/v1/saves/{save.save_id}/narrate", {"player_input": ACTION, "stream": True}).streaming_content
    )
    streamed = user_prompt(narrator.server.requests_for("narrate")[-1])
    # 2. The narrator's prompt preview.
    preview = _pre(
        client.get(reverse("saves:narrator_prompt", args=[save.save_id]), {"input": ACTION}).content.decode(),
        "prompt-user",
    )
    # 3. The Context viewer.
    viewer = _pre(client.get(reverse("memory:context", args=[save.save_id]), {"q": ACTION}).content.decode())
    # 4. The memory proxy, repeating the chat's recent turns (`proxy_repeat_chat`; by default it leaves them out,
    # test below), the chat carrying the save's last turn.
    save.universe.meta.create(key="proxy_repeat_chat", value="true")
    body = _chat(save)
    assert api.post("/v1/chat/completions", body).status_code == 200
    proxied = _proxy_memory(narrator.server.requests[-1]["messages"])

    for user in (console, narrated, streamed, preview):
        assert user.startswith(text + "\n\n## The player's action")
        assert _memory_of(user) == text
    assert viewer == text and proxied == text


def test_the_proxy_by_default_prints_the_context_without_the_turns_its_chat_carries(
    harbour, playtester, make_api, narrator
):
    save, api = harbour, make_api(playtester)
    body = _chat(save)
    assert api.post("/v1/chat/completions", body).status_code == 200
    messages = narrator.server.requests[-1]["messages"]
    carried = next_turn_context(
        game_save=save, params=ContextParams(query_text=ACTION, token_budget=2000), carried_turns={6}
    )
    assert _proxy_memory(messages) == carried.text
    assert TURNS[-1][1] not in _proxy_memory(messages) and "Turn 5" in carried.text  # turn 6 is the chat's, 5 is not
    # What stays the same from one request to the next after the system prompt, what changes after the chat.
    assert messages[1]["content"].startswith(MEMORY_HEADING + "\n## Lore (always active)")
    assert messages[-1]["content"].startswith(NOTE_HEADING + "\n## Recalled for this action")
    assert messages[2:-1] == body["messages"][1:]


def _context(save):
    return next_turn_context(game_save=save, params=ContextParams(query_text=ACTION, token_budget=2000))


@pytest.mark.parametrize("layer", LAYERS)
def test_no_mark_is_lost_on_any_layer(harbour, layer):
    context = _context(harbour)
    text = context.text
    marked = [i for i in context.included if i.layer == layer and i.why.get("narrator_only")]
    assert marked, f"the scenario has no narrator-only {layer} item"
    for item in marked:
        printed = ("[narrator-only] " if layer == "chapter" else "- [narrator-only] ") + item.text
        assert printed in text, item.text
    # No item is printed without the mark it has.
    for item in context.included:
        if item.why.get("narrator_only"):
            assert text.count(item.text) == text.count("[narrator-only] " + item.text)


def test_the_player_acting_from_the_console_knows_their_own_turns(harbour):
    """No `present` names Ash: the player is on scene in every turn they act in (and their facts are theirs)."""
    from studio.memory.knowledge.selectors import knowledge_at, knowledge_flags

    context = _context(harbour)
    assert [c["name"] for c in context.pov.characters] == ["Mira", "Ash"]  # Ash: present at 6, where they acted
    turns = {i.ref["turn_id"]: i for i in context.included if i.layer == "chapter"}
    assert not turns[6].why.get("narrator_only")  # Ash acted in turn 6
    assert turns[5].why.get("narrator_only")  # nobody on scene was at turn 5 (no action: Ash was not there)
    table = knowledge_at(harbour, turn=6)
    ash = table.characters.index("Ash")
    debt = next(row for row in table.facts if row["fact"].statement.startswith("Kael owes"))
    seen = next(row for row in table.facts if row["fact"].statement.startswith("Mira was seen"))
    assert not seen["cells"][ash].known  # turn 5: no action, no presence
    assert debt["cells"][ash].known and debt["cells"][ash].why == "Ash acted in turn 1 (the player character)"
    assert table.counts()["Ash"]["facts"] == 1  # the debt (turn 1), not the map (turn 2, no action)
    assert not any(
        f["statement"].startswith("Kael owes") for f in knowledge_flags(harbour, turn=6)["unwitnessed_facts"]
    )
    # A universe can turn it off: then only the presence rows count.
    harbour.universe.meta.create(key="pov_player_on_scene", value="false")
    table = knowledge_at(harbour, turn=6)
    assert table.counts().get("Ash", {"facts": 0})["facts"] == 0


def test_the_point_of_view_is_paid_from_the_budget(harbour):
    context = _context(harbour)
    assert context.section_tokens > 0 and context.pov.tokens > 0
    headings = sum(
        {(i.layer, i.why["group"]): i.why["group_tokens"] for i in context.included if i.why.get("group")}.values()
    )
    assert context.used_tokens == sum(i.tokens for i in context.included) + headings + context.section_tokens
    assert context.used_tokens <= 2000
    tight = next_turn_context(game_save=harbour, params=ContextParams(query_text=ACTION, token_budget=400))
    assert tight.pov is not None and tight.used_tokens <= 400


def test_a_characters_list_names_what_only_they_know_and_repeats_nothing_shown(harbour):
    context = _context(harbour)
    scene = context.section_texts["on_scene"]
    # Mira and Ash are on scene, and were at turns 1, 3, 4 and 6 (Ash acted in them): what both know is common
    # knowledge, listed nowhere; what one knows is named, not repeated (a Night Watch secret: Mira's).
    assert scene.startswith("On scene: Mira, Ash.") and "### Mira knows\n- The Tunnel" in scene
    assert "### Ash knows" not in scene
    for item in context.included:
        if len(item.text) > 30:
            assert item.text not in scene


@pytest.mark.parametrize("where", ["api", "narrate", "viewer"])
def test_an_unknown_point_of_view_is_refused_naming_the_known_characters(
    harbour, where, client, playtester, make_api, narrator
):
    api = make_api(playtester)
    if where == "viewer":
        client.force_login(playtester)
        for headers in ({}, {"HTTP_HX_REQUEST": "true"}):
            page = client.get(
                reverse("memory:context", args=[harbour.save_id]), {"q": ACTION, "pov": "Mria"}, **headers
            ).content.decode()
            assert "No character is called “Mria”" in html.unescape(page) and "Ash, Ivo, Kael, Mira" in page
            assert 'id="budget-line"' not in page
        return
    path = "context" if where == "api" else "narrate"
    body = {"query_text" if where == "api" else "player_input": ACTION, "pov": ["Mria"]}
    response = api.post(f"/api/v1/saves/{harbour.save_id}/{path}", body)
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "validation_error"
    assert error["details"]["pov"] == ["No character is called “Mria”. The known characters: Ash, Ivo, Kael, Mira."]
    # A known alias is the character: "Kay" is Kael.
    ok = api.post(f"/api/v1/saves/{harbour.save_id}/context", {"query_text": ACTION, "pov": ["Kay"]})
    assert ok.status_code == 200 and [c["name"] for c in ok.json()["pov"]["characters"]] == ["Kael"]
    assert json.dumps(ok.json()["text"]).count("## On scene") == 1


def test_a_new_layer_is_one_registration(harbour):
    """A provider with its place in the layout and its items' policy: the allocator spends the budget on its
    items, the renderer prints them in their section, every reader gets them."""
    from studio.memory.recall.context_items import ContextItem
    from studio.memory.recall.layers import LayerProvider, register_layer, unregister_layer
    from studio.memory.recall.layout import ItemPolicy, Part, Tier

    policy = ItemPolicy("recalled", "rumour", Tier.RECALL, recall=True)

    def rumours(assembly):
        return [
            ContextItem.of(
                layer="rumour",
                text=f"Rumour {n}: the bell rang {n} times.",
                reason="a rumour",
                why={},
                ref={},
                policy=policy,
            )
            for n in (1, 2)
        ]

    register_layer(
        LayerProvider("rumours", rumours, part=("recalled", Part("rumour", "Rumours", "### Rumours")), policy=policy)
    )
    try:
        with pytest.raises(ValueError, match="registered already"):
            register_layer(LayerProvider("rumours", rumours))
        context = _context(harbour)
        text = context.text
        # The point of view has no rule for a rumour: the narrator's, marked as such (on every layer).
        assert "### Rumours\n- [narrator-only] Rumour 1: the bell rang 1 times.\n- [narrator-only] Rumour 2" in text
        assert text.index("### Rumours") < text.index("## On scene")  # at the end of its section
        assert any(s["layer"] == "rumour" for s in context.sections())
        assert all(i.included and i.policy.budget_class == "rumour" for i in context.items if i.layer == "rumour")
    finally:
        unregister_layer("rumours")
    assert "Rumour" not in _context(harbour).text

"""The request shapes SillyTavern, RisuAI and an OpenAI client send, against the scripted upstream:
what reaches the model (every field but `model` as sent, the memory where the player put the
marker), what comes back (the upstream's bytes), and what the save keeps (turns, proposals)."""

from __future__ import annotations

import json

import httpx
import pytest

from studio.memory.models import LLMCall
from studio.proxy.history import MARKER
from studio.saves.models import NarratorAlternative, NarratorDraft, NarratorSnapshot
from studio.world.models import Event
from tests.llm_server import Reply
from tests.proxy.frontends import GREETING, ST_CONTINUE, ST_IMPERSONATE, risuai, sillytavern
from tests.proxy.player import sse_text

# Transactional: the lore sync and the turn jobs run when their transaction commits, so the
# memory context has something in it.
pytestmark = pytest.mark.django_db(transaction=True)

URL = "/v1/chat/completions"


def relayed(upstream) -> dict:
    """The last request the upstream got from the proxy, without the test server's own keys."""
    return {k: v for k, v in upstream.relayed[-1].items() if not k.startswith("_")}


def play(proxy, build, model, turns):
    """Send each turn as the front end would; return the chat (input, answer) pairs it holds."""
    chat = []
    for player_input in turns:
        response = proxy.post(URL, build(model, chat, player_input))
        assert response.status_code == 200, response.content
        if response.streaming:
            answer = sse_text(b"".join(response.streaming_content))
        else:
            answer = response.json()["choices"][0]["message"]["content"]
        chat.append((player_input, answer))
    return chat


def test_sillytavern_fields_reach_the_model_and_memory_goes_at_the_marker(proxy, upstream, play_save):
    model = f"axiom/{play_save.save_id}/story-model"
    chat = play(proxy, sillytavern, model, ["I shake the rain off my coat.", "I ask Mira about Kaël."])
    sent = sillytavern(model, chat, "Where is Kaël now?")
    response = proxy.post(URL, sent)
    body = b"".join(response.streaming_content)
    assert response["Content-Type"].startswith("text/event-stream")
    got = relayed(upstream)
    assert got["model"] == "story-model"
    for key in (
        "temperature",
        "max_tokens",
        "stream",
        "presence_penalty",
        "frequency_penalty",
        "top_p",
        "top_k",
        "stop",
        "logit_bias",
    ):
        assert got[key] == sent[key], key
    # The front end's messages, in order, with the memory block where the marker was.
    assert len(got["messages"]) == len(sent["messages"])
    main = got["messages"][0]["content"]
    assert MARKER not in json.dumps(got["messages"])
    assert main.startswith("Write Mira's next reply") and "## Memory" in main
    assert "Kaël" in main  # the lore entry the input activated
    assert got["messages"][1:] == sent["messages"][1:]
    assert response["X-Axiom-Memory"] == "marker"
    # The first two turns are the save's; the third is a proposal.
    play_save.refresh_from_db()
    assert list(Event.objects.filter(game_save=play_save).values_list("player_input", "narrative")) == chat
    assert sse_text(body) == NarratorAlternative.objects.get(draft__turn_id=3, draft__game_save=play_save).text


def test_without_a_marker_what_changes_goes_after_the_chat_and_the_rest_after_the_system_prompts(
    proxy, upstream, play_save
):
    play_save.universe.lore_entries.create(
        entry_id="tide-law", title="The tide law", constant=True, text="No boat leaves Port Vey against the tide."
    )
    model = f"axiom/{play_save.save_id}"
    chat = play(proxy, lambda m, c, p: sillytavern(m, c, p, marker=False, stream=False), model, ["I ask about Kaël."])
    sent = sillytavern(model, chat, "And Port Vey?", marker=False, stream=False)
    response = proxy.post(URL, sent)
    got = relayed(upstream)
    assert got["model"] == "test-model"  # no upstream part: the studio's narrate model
    # The default placement ("split"): the front end's messages untouched up to its newest one, what this
    # request recalled as a depth-0 note after it, before the post-history instruction. The lore the
    # universe always shows (here: the one constant entry) stays put after the system prompts.
    assert got["messages"][:7] == sent["messages"][:6] + [got["messages"][6]]
    assert got["messages"][6]["content"].startswith("## Memory\n## Lore (always active)")
    assert got["messages"][7:-2] == sent["messages"][6:-1]
    assert got["messages"][-2]["role"] == "system" and got["messages"][-2]["content"].startswith(
        "## Memory for this turn\n## Recalled for this action"
    )
    assert got["messages"][-1] == sent["messages"][-1]
    assert response["X-Axiom-Memory"] == "after_system+note"
    # The chat carries turn 1: the memory does not repeat it.
    assert "I ask about Kaël." not in got["messages"][6]["content"] + got["messages"][-2]["content"]
    # The universe may ask for the whole memory after the system prompts (as before this layout).
    play_save.universe.meta.create(key="proxy_memory_placement", value="system")
    proxy.post(URL, sent)
    got = relayed(upstream)
    assert [m["role"] for m in got["messages"][:8]] == ["system"] * 7 + ["assistant"]
    assert got["messages"][6]["content"].startswith("## Memory") and got["messages"][7]["content"] == GREETING


def test_the_stream_is_the_upstream_stream_byte_for_byte(proxy, upstream, play_save):
    upstream.reply = Reply(
        content="The bell rings twice; Mira counts coins.", chunks=["The bell ", "rings twice;", " Mira counts coins."]
    )
    model = f"axiom/{play_save.save_id}/test-model"
    through_proxy = b"".join(proxy.post(URL, sillytavern(model, [], "I wait.")).streaming_content)
    direct = httpx.post(upstream.server.base_url + "/chat/completions", json=relayed(upstream)).content
    assert through_proxy == direct
    assert b"data: [DONE]" in through_proxy and b": ping" in through_proxy


def test_continue_is_relayed_and_records_nothing_until_the_chat_carries_it(proxy, upstream, play_save):
    model = f"axiom/{play_save.save_id}/test-model"
    chat = play(proxy, sillytavern, model, ["I knock.", "I step inside."])
    partial = "Mira gestures at a"
    upstream.reply = Reply(content=partial)  # the answer stopped short: the player continues it
    proxy.post(URL, sillytavern(model, chat, "I sit down.", stream=False))
    upstream.reply = Reply(content=" stool by the stove.")
    alternatives = NarratorAlternative.objects.filter(draft__game_save=play_save).count()
    response = proxy.post(URL, sillytavern(model, chat, "I sit down.", kind="continue", partial=partial))
    assert sse_text(b"".join(response.streaming_content)) == " stool by the stove."
    got = relayed(upstream)
    assert got["messages"][-1] == {"role": "system", "content": ST_CONTINUE}
    assert got["messages"][-2] == {"role": "assistant", "content": partial}
    assert NarratorAlternative.objects.filter(draft__game_save=play_save).count() == alternatives
    play_save.refresh_from_db()
    assert play_save.current_turn == 2
    # The player's next message carries the continued answer: it becomes turn 3's narration,
    # accepted from the proposal it grew out of (the snapshot says it was edited).
    upstream.reply = None
    full = partial + " stool by the stove."
    proxy.post(URL, sillytavern(model, chat + [("I sit down.", full)], "I thank her.", stream=False))
    play_save.refresh_from_db()
    assert play_save.current_turn == 3
    assert Event.objects.get(game_save=play_save, turn_id=3).narrative == full
    snapshot = NarratorSnapshot.objects.get(game_save=play_save, turn_id=3)
    assert snapshot.edited and snapshot.player_input == "I sit down." and snapshot.proposed == partial


def test_impersonate_is_relayed_and_its_answer_is_never_narration(proxy, upstream, play_save):
    model = f"axiom/{play_save.save_id}/test-model"
    chat = play(proxy, sillytavern, model, ["I knock."])
    upstream.reply = Reply(content="I ask whether the tide will turn tonight.")
    drafts = list(NarratorDraft.objects.filter(game_save=play_save).values_list("pk", "status"))
    response = proxy.post(URL, sillytavern(model, chat, None, kind="impersonate"))
    assert sse_text(b"".join(response.streaming_content)) == "I ask whether the tide will turn tonight."
    assert relayed(upstream)["messages"][-1]["content"] == ST_IMPERSONATE
    assert list(NarratorDraft.objects.filter(game_save=play_save).values_list("pk", "status")) == drafts
    play_save.refresh_from_db()
    assert play_save.current_turn == 0  # the first answer is still only a proposal
    # The impersonated text comes back as the player's message: turn 1 is written, 2 proposed.
    upstream.reply = None
    proxy.post(URL, sillytavern(model, chat, "I ask whether the tide will turn tonight.", stream=False))
    play_save.refresh_from_db()
    assert play_save.current_turn == 1
    assert NarratorDraft.objects.get(game_save=play_save, status="open").player_input.startswith("I ask whether")


def test_risuai_developer_roles_images_and_no_stream(proxy, upstream, play_save):
    play_save.universe.lore_entries.create(
        entry_id="tide-law", title="The tide law", constant=True, text="No boat leaves Port Vey against the tide."
    )
    model = f"axiom/{play_save.save_id}/test-model"
    chat = play(
        proxy,
        lambda m, c, p: risuai(m, c, p, image=len(c) == 2),
        model,
        ["I hand Mira a letter.", "I show her the map.", "I point at the reef."],
    )
    got = relayed(upstream)
    assert got["stream"] is False and "stop" not in got
    assert [m["role"] for m in got["messages"][:3]] == ["developer", "developer", "system"]
    assert got["messages"][2]["content"].startswith("## Memory\n## Lore (always active)")  # what stays put
    assert got["messages"][-1]["content"] == "[Global note] Keep replies under 120 words."
    assert got["messages"][-2]["content"].startswith("## Memory for this turn")  # after the chat's last message
    assert isinstance(got["messages"][-3]["content"], list)  # the image message, as sent
    play_save.refresh_from_db()
    assert list(Event.objects.filter(game_save=play_save).values_list("player_input", "narrative")) == chat[:2]


def test_a_window_that_starts_mid_chat_appends_without_rewinding(proxy, upstream, play_save):
    model = f"axiom/{play_save.save_id}/test-model"
    chat = play(proxy, sillytavern, model, [f"Step {n}." for n in range(1, 7)])
    play_save.refresh_from_db()
    assert play_save.current_turn == 5
    generation = play_save.timeline_generation
    # The front end's context is full: it sends turns 3-6 only.
    proxy.post(URL, sillytavern(model, chat[2:], "Step 7.", stream=False))
    play_save.refresh_from_db()
    assert play_save.current_turn == 6 and play_save.timeline_generation == generation
    assert Event.objects.get(game_save=play_save, turn_id=6).narrative == chat[5][1]


def test_each_relay_is_one_logged_call_of_the_save(proxy, upstream, play_save):
    model = f"axiom/{play_save.save_id}/test-model"
    play(proxy, sillytavern, model, ["One.", "Two."])
    calls = LLMCall.objects.filter(game_save_id=play_save.pk, operation="proxy")
    assert calls.count() == 2 and all(call.error == "" and call.model == "test-model" for call in calls)


def test_a_reader_that_leaves_mid_stream_cancels_the_proposal_and_the_upstream(proxy, upstream, play_save):
    upstream.reply = Reply(content="one two three four five six", chunk_delay=0.2)
    response = proxy.post(URL, sillytavern(f"axiom/{play_save.save_id}/test-model", [], "I wait."))
    chunks = iter(response.streaming_content)
    next(chunks)
    response.close()  # what Django does when the client disconnects
    alternative = NarratorAlternative.objects.get(draft__game_save=play_save)
    assert alternative.status == "cancelled"
    assert upstream.server.disconnected.wait(5)
    call = LLMCall.objects.get(game_save_id=play_save.pk, operation="proxy")
    assert call.error.startswith("cancelled by the reader")


def test_a_stopped_answer_the_chat_keeps_is_accepted_with_its_snapshot(proxy, upstream, play_save):
    """The front end's Stop leaves the shown text in its chat: that turn gets the prompt and
    memory snapshot of the answer (it was appended bare, with no snapshot)."""
    model = f"axiom/{play_save.save_id}/test-model"
    upstream.reply = Reply(content="one two three four five six", chunk_delay=0.2)
    response = proxy.post(URL, sillytavern(model, [], "I wait."))
    chunks, shown = iter(response.streaming_content), b""
    while len(sse_text(shown).split()) < 3:
        shown += next(chunks)
    response.close()  # the player pressed Stop
    shown_text = sse_text(shown).strip()
    alternative = NarratorAlternative.objects.get(draft__game_save=play_save)
    assert alternative.status == "cancelled" and alternative.text.strip()
    assert alternative.system_prompt and alternative.context
    assert alternative.text.strip() == shown_text  # the relay reads each chunk before handing it on
    upstream.reply = None
    proxy.post(URL, sillytavern(model, [("I wait.", shown_text)], "I look around.", stream=False))
    assert Event.objects.get(game_save=play_save, turn_id=1).narrative == shown_text
    snapshot = NarratorSnapshot.objects.get(game_save=play_save, turn_id=1)
    assert (snapshot.proposed, snapshot.edited, snapshot.player_input) == (alternative.text, False, "I wait.")
    assert (snapshot.system_prompt, snapshot.user_prompt, snapshot.context) == (
        alternative.system_prompt,
        alternative.user_prompt,
        alternative.context,
    )
    assert snapshot.finish_reason == "cancelled"


def test_an_upstream_that_breaks_mid_stream_fails_the_proposal(proxy, upstream, play_save):
    upstream.reply = Reply(content="one two three four", error_after=2)
    response = proxy.post(URL, sillytavern(f"axiom/{play_save.save_id}/test-model", [], "I wait."))
    raw = b"".join(response.streaming_content)
    assert b'"error"' in raw  # the endpoint's error event reaches the front end as sent
    alternative = NarratorAlternative.objects.get(draft__game_save=play_save)
    assert alternative.status == "failed" and alternative.text == "one two " and "broke off" in alternative.error

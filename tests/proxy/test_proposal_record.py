"""A proposal keeps the prompt and the memory it was asked with, written once its answer began (its explain record,
~200 KB, need not delay the first byte), or when the answer ended, or failed, first."""

from __future__ import annotations

import pytest

from studio.saves.models import NarratorAlternative
from tests.llm_server import Reply

pytestmark = pytest.mark.django_db

URL = "/v1/chat/completions"


def body(play_save, *, stream: bool) -> dict:
    return {
        "model": f"axiom/{play_save.save_id}/test-model",
        "stream": stream,
        "messages": [
            {"role": "system", "content": "You narrate Port Vey.\n{{axiom_memory}}"},
            {"role": "user", "content": "I ask Mira about the ledger."},
        ],
    }


def recorded(play_save) -> NarratorAlternative:
    return NarratorAlternative.objects.filter(draft__game_save=play_save).latest("id")


def test_the_record_is_written_after_the_first_chunk_is_handed_on(proxy, upstream, play_save):
    upstream.reply = Reply(content="The bell rings twice.", chunks=["The bell ", "rings ", "twice."])
    response = proxy.post(URL, body(play_save, stream=True))
    assert response.status_code == 200
    chunks = iter(response.streaming_content)
    next(chunks)
    pending = recorded(play_save)
    assert (pending.status, pending.user_prompt, pending.context) == ("streaming", "", {})  # not before the first byte
    next(chunks)  # the front end reads on: the record is written meanwhile
    written = recorded(play_save)
    assert "I ask Mira about the ledger." in written.user_prompt and "You narrate Port Vey." in written.system_prompt
    assert written.context["proxy"]["stream"] is True and written.context["query_text"]
    assert written.system_prompt == upstream.relayed[-1]["messages"][0]["content"]  # the prompt as it was sent
    b"".join(chunks)
    assert recorded(play_save).status == "done" and recorded(play_save).context == written.context


def test_an_answer_not_streamed_has_its_record(proxy, upstream, play_save):
    response = proxy.post(URL, body(play_save, stream=False))
    assert response.status_code == 200
    alternative = recorded(play_save)
    assert alternative.status == "done" and alternative.context["proxy"]["stream"] is False
    assert "I ask Mira about the ledger." in alternative.user_prompt


def test_a_refused_relay_keeps_what_it_asked_with(proxy, upstream, play_save):
    upstream.reply = Reply(status=400, content="no such model")
    response = proxy.post(URL, body(play_save, stream=True))
    assert response.status_code == 400
    alternative = recorded(play_save)
    assert alternative.status == "failed" and "I ask Mira about the ledger." in alternative.user_prompt
    assert alternative.context["proxy"]["placed"]

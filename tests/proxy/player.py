"""A chat front end, as the proxy's tests play it: it keeps its own chat and sends it whole.

`Player` holds what a front end holds (a system prompt, the character's greeting, the chat's
(input, answer) pairs) and sends every request the way SillyTavern does: system prompt,
greeting, the chat, the new user message. Swipe, edit and delete change its chat the way the
front end's buttons do, without a request; the next request carries the change.

`state(save, vectors)` is what "the same save" means in these tests: the Event_Log, the
living memory (facts, beliefs, mental models, via tests/saves/scenario.snapshot), the vector
chunks, and the narrator snapshots (what the narrator saw: input, prompt, memory text).
`play_straight(...)` plays a new save straight to a given chat, one request per turn.
"""

from __future__ import annotations

import json

from studio.saves.models import NarratorSnapshot
from studio.world.models import MemoryMode
from studio.saves.narrator.snapshots import snapshot_prompts
from studio.saves.services import save_create
from tests.saves.scenario import snapshot

SYSTEM = "You are the narrator of Port Vey, a harbour town.\n{{axiom_memory}}\nWrite in the second person."
GREETING = "Rain over Port Vey. The harbour master waits by the pier."


def sse_text(raw: bytes) -> str:
    """Return the text of a chat-completions event stream."""
    parts = []
    for line in raw.decode().splitlines():
        if line.startswith("data:") and line[5:].strip() not in ("", "[DONE]"):
            for choice in json.loads(line[5:]).get("choices") or []:
                parts.append((choice.get("delta") or {}).get("content") or "")
    return "".join(parts)


class Player:
    def __init__(
        self,
        api,
        game_save,
        *,
        stream: bool = False,
        model: str = "test-model",
        system: str = SYSTEM,
        greeting: str = GREETING,
        memory_tokens: int | None = None,
    ):
        self.api = api
        self.save = game_save
        self.stream = stream
        self.model = model
        self.system = system
        self.greeting = greeting
        self.memory_tokens = memory_tokens
        self.chat: list[list[str]] = []  # [input, answer]; the last answer is the pending turn's

    def messages(self, turns, pending: str) -> list[dict]:
        messages = [{"role": "system", "content": self.system}, {"role": "assistant", "content": self.greeting}]
        for player_input, answer in turns:
            messages += [{"role": "user", "content": player_input}, {"role": "assistant", "content": answer}]
        messages.append({"role": "user", "content": pending})
        return messages

    def request(self, turns, pending: str, **extra):
        body = {
            "model": f"axiom/{self.save.save_id}/{self.model}",
            "messages": self.messages(turns, pending),
            "stream": self.stream,
            **extra,
        }
        if self.memory_tokens is not None:
            body["axiom_memory_tokens"] = self.memory_tokens
        response = self.api.post("/v1/chat/completions", body)
        assert response.status_code == 200, response.content
        if self.stream:
            return sse_text(b"".join(response.streaming_content))
        return response.json()["choices"][0]["message"]["content"]

    def say(self, text: str) -> str:
        """Send a new message; the answer becomes the chat's last message."""
        answer = self.request([tuple(t) for t in self.chat], text)
        self.chat.append([text, answer])
        return answer

    def swipe(self) -> str:
        """Ask again for the last answer (the front end's swipe / regenerate)."""
        answer = self.request([tuple(t) for t in self.chat[:-1]], self.chat[-1][0])
        self.chat[-1][1] = answer
        return answer

    def edit_answer(self, turn: int, text: str) -> None:
        self.chat[turn - 1][1] = text

    def delete_after(self, turn: int) -> None:
        """Delete every message after turn `turn`'s answer."""
        del self.chat[turn:]

    @property
    def settled(self) -> list[tuple[str, str]]:
        return [tuple(t) for t in self.chat[:-1]]

    @property
    def pending(self) -> str:
        return self.chat[-1][0]


def play_straight(
    api, universe, settled, pending: str, *, name: str = "straight", memory_mode=MemoryMode.LIVING, **front_end
):
    """Return a new save played through the proxy straight to `settled` + `pending`, one request a turn.

    `front_end`: the Player's system prompt and greeting, when not the tests' own."""
    game_save = save_create(universe=universe, name=name, memory_mode=memory_mode)
    player = Player(api, game_save, **front_end)
    for index, (player_input, _) in enumerate(settled):
        player.request(settled[:index], player_input)
    player.request(settled, pending)
    game_save.refresh_from_db()
    return game_save


def narrator_snapshots(game_save) -> dict[int, tuple]:
    prompts = snapshot_prompts(game_save=game_save)  # each prompt whole (stored as a delta of the one before)
    return {
        s.turn_id: (s.player_input, *prompts[s.turn_id], (s.context or {}).get("text"))
        for s in NarratorSnapshot.objects.filter(game_save=game_save)
    }


def state(game_save, vectors) -> dict:
    game_save.refresh_from_db()
    memory = snapshot(game_save)
    memory["chunks"] = [(c["turn_id"], c["chunk_type"], c["text"]) for c in vectors.get_chunks(game_save.save_id)]
    return memory

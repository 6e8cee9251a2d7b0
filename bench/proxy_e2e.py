"""End to end on a real model: the `openai` client plays a save through the memory proxy.

Not a test and never run in CI: it needs an OpenAI-compatible endpoint given by the usual
variables (`AXIOM_LLM_BASE_URL`, `AXIOM_LLM_MODEL`, `AXIOM_LLM_TIMEOUT`), for example the
local instrument `../shared/tools/local-llm start`. On a throw-away SQLite database and
embedded Chroma directory (the packaged MiniLM embedder) it serves the studio over HTTP in
this process and, with the real `openai` client as the chat front end (streamed requests,
SillyTavern's order: system prompt with `{{axiom_memory}}`, greeting, chat, new message):

1. plays `--turns` turns (default 10);
2. swipes the last answer;
3. edits turn 6's narration and sends the next message;
4. deletes back to turn 4 and sends a new message;
5. plays 3 more turns.

After each step the proxy save is compared with a save played straight to the same chat
(through the proxy, one request a turn, the scripted server of tests/llm_server.py answering:
only the chat the front end sends decides what is kept): the Event_Log, the vector chunks,
the lore activation rows, and every narrator snapshot the proxy save holds (input, prompt,
memory text) against the straight save's at that turn. The saves use classic memory (the
turn's embedding, lore activation): the living pipeline's extraction would be more real-model
calls per turn than this machine can give; facts, beliefs and models are compared in
tests/proxy/test_scenario.py with the scripted model. Exit status 1 when a comparison fails.

    .venv/bin/python bench/proxy_e2e.py --out bench/data/proxy_e2e
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
from pathlib import Path
from socketserver import ThreadingMixIn
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import ROOT, setup_django  # noqa: E402

SYSTEM = "You are the narrator of Port Vey, a rainy harbour town. Answer in two or three sentences.\n{{axiom_memory}}"
GREETING = "Rain over Port Vey. Mira, the harbour master's clerk, looks up from her ledger."
LORE = {
    "Mira": "Mira is the harbour master's clerk: shrewd, warm, owed money by half the town.",
    "Kael": "Kael is a smuggler who owes the harbour master forty crowns and distrusts the Guild.",
    "Bellspire": "Bellspire is a drowned chapel west of the harbour; its bell still rings at low tide.",
    "Guild": "The Lantern Guild keeps the harbour lights and taxes every boat that lands.",
}
ACTIONS = [
    "I shake the rain off my coat and greet Mira.",
    "I ask Mira whether Kael is in town.",
    "I ask what Kael owes the harbour master.",
    "I walk down to the pier to look for Kael.",
    "I ask a fisherman about the Guild.",
    "I pay the fisherman a coin for news of Kael.",
    "I follow the fisherman's directions to the net sheds.",
    "I call out Kael's name.",
    "I ask Kael about Bellspire.",
    "I offer to help Kael pay his debt.",
]
MAX_TOKENS = 60
MEMORY_TOKENS = 400  # a small model's context (4,096 tokens here): the memory block's budget per request
MORE = [
    "I leave the harbour and climb toward Bellspire.",
    "I listen for the bell at low tide.",
    "I light a lantern and step into the chapel.",
]


class QuietHandler(WSGIRequestHandler):
    def log_message(self, *args):
        pass


class ThreadingWSGIServer(ThreadingMixIn, WSGIServer):
    daemon_threads = True


class FrontEnd:
    """The chat a front end keeps, sent whole with the `openai` client on every message."""

    def __init__(self, client, save_id: str, log: list, stream: bool):
        self.client = client
        self.stream = stream
        self.model = f"axiom/{save_id}"
        self.chat: list[list[str]] = []
        self.log = log

    def messages(self, turns, pending):
        out = [{"role": "system", "content": SYSTEM}, {"role": "assistant", "content": GREETING}]
        for player_input, answer in turns:
            out += [{"role": "user", "content": player_input}, {"role": "assistant", "content": answer}]
        return out + [{"role": "user", "content": pending}]

    def request(self, turns, pending, step):
        started = time.perf_counter()
        first = None
        options = dict(
            model=self.model,
            messages=self.messages(turns, pending),
            max_tokens=MAX_TOKENS,
            temperature=0.7,
            stop=["\nYou:"],
            extra_body={"axiom_memory_tokens": MEMORY_TOKENS},
        )
        if self.stream:
            parts = []
            for chunk in self.client.chat.completions.create(stream=True, **options):
                if first is None:
                    first = time.perf_counter() - started
                if chunk.choices and chunk.choices[0].delta.content:
                    parts.append(chunk.choices[0].delta.content)
            answer = "".join(parts)
        else:
            answer = self.client.chat.completions.create(**options).choices[0].message.content or ""
        answer = answer.strip() or "(the model said nothing)"
        self.log.append(
            {
                "step": step,
                "input": pending,
                "answer": answer,
                "first_chunk_s": round(first, 2) if first else None,
                "total_s": round(time.perf_counter() - started, 2),
            }
        )
        print(f"  {step}: {time.perf_counter() - started:.1f} s, {len(answer)} characters", flush=True)
        return answer

    def say(self, text, step):
        answer = self.request([tuple(t) for t in self.chat], text, step)
        self.chat.append([text, answer])

    def swipe(self, step):
        self.chat[-1][1] = self.request([tuple(t) for t in self.chat[:-1]], self.chat[-1][0], step)

    @property
    def settled(self):
        return [tuple(t) for t in self.chat[:-1]]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--turns", type=int, default=10)
    parser.add_argument("--out", default=str(ROOT / "bench" / "data" / "proxy_e2e"))
    parser.add_argument(
        "--stream",
        action="store_true",
        help="stream the answers (llama-cpp-python's server cuts a stream when another request "
        "waits: only on a model no one else is using)",
    )
    args = parser.parse_args()
    if not os.environ.get("AXIOM_LLM_BASE_URL"):
        print("Set AXIOM_LLM_BASE_URL (and AXIOM_LLM_MODEL): e.g. ../shared/tools/local-llm start", file=sys.stderr)
        return 2
    os.environ["AXIOM_JOBS_EAGER"] = "1"  # each turn's embedding is done when its request returns
    setup_django()

    import openai
    from django.conf import settings
    from django.contrib.auth.models import Group, User
    from django.core.wsgi import get_wsgi_application

    from studio.api.services import api_token_create
    from studio.roles import PLAYTESTERS
    from studio.world.models import Event, LoreEntry, MemoryMode, Universe
    from studio.saves.services import save_create
    from studio.memory.vector import get_vector_memory
    from tests.llm_server import Reply, ScriptedLLMServer
    from tests.plugins.api import ApiClient
    from tests.proxy.player import narrator_snapshots, play_straight

    settings.ALLOWED_HOSTS = ["*"]
    real_url, real_model = settings.AXIOM_LLM_BASE_URL, settings.AXIOM_LLM_MODEL
    user = User.objects.create_user("player", password="x")
    user.groups.add(Group.objects.get_or_create(name=PLAYTESTERS)[0])
    universe = Universe.objects.create(name="Port Vey", slug="port-vey", owner=user)
    for title, text in LORE.items():
        LoreEntry.objects.create(
            universe=universe, entry_id=title.lower(), title=title, kind="character", text=text, keys=[title]
        )
    _, key = api_token_create(user=user, name="e2e")
    game_save = save_create(universe=universe, name="proxy e2e", memory_mode=MemoryMode.CLASSIC)

    httpd = make_server(
        "127.0.0.1", 0, get_wsgi_application(), server_class=ThreadingWSGIServer, handler_class=QuietHandler
    )
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{httpd.server_port}/v1"
    client = openai.OpenAI(base_url=base, api_key=key, max_retries=0, timeout=float(settings.AXIOM_LLM_TIMEOUT) + 30)
    scripted = ScriptedLLMServer(
        lambda request: Reply(content="(straight play: this answer is replaced by the chat's)")
    ).start()
    vectors = get_vector_memory()
    log: list[dict] = []
    steps: list[dict] = []
    front = FrontEnd(client, game_save.save_id, log, args.stream)

    def rows(save):
        from studio.memory.models import LoreActivation as Activation

        save.refresh_from_db()
        return {
            "turn": save.current_turn,
            "events": list(save.events.order_by("turn_id").values_list("turn_id", "player_input", "narrative")),
            "chunks": [(c["turn_id"], c["text"]) for c in vectors.get_chunks(save.save_id, chunk_type="narrative")],
            "lore_activations": list(
                Activation.objects.filter(game_save=save).order_by("turn_id").values_list("turn_id", "state")
            ),
        }

    def compare(step: str, expected_snapshots: list[int]):
        settings.AXIOM_LLM_BASE_URL, settings.AXIOM_LLM_MODEL = scripted.base_url, "scripted"
        try:
            straight = play_straight(
                ApiClient(key),
                universe,
                front.settled,
                front.chat[-1][0],
                name=f"straight {step}",
                memory_mode=MemoryMode.CLASSIC,
                system=SYSTEM,
                greeting=GREETING,
                memory_tokens=MEMORY_TOKENS,
            )
        finally:
            settings.AXIOM_LLM_BASE_URL, settings.AXIOM_LLM_MODEL = real_url, real_model
        ours, theirs = rows(game_save), rows(straight)
        snaps_ours, snaps_theirs = narrator_snapshots(game_save), narrator_snapshots(straight)
        checks = {
            "turns equal": ours["events"] == theirs["events"],
            "chunks equal": ours["chunks"] == theirs["chunks"],
            "lore activation equal": ours["lore_activations"] == theirs["lore_activations"],
            "snapshot turns as expected": sorted(snaps_ours) == expected_snapshots,
            "snapshots equal the straight save's": all(snaps_ours[t] == snaps_theirs.get(t) for t in snaps_ours),
            "every turn embedded": [t for t, _ in ours["chunks"]] == list(range(1, ours["turn"] + 1)),
        }
        steps.append(
            {
                "step": step,
                "save_turn": ours["turn"],
                "chat_turns": len(front.settled),
                "snapshots": sorted(snaps_ours),
                "checks": checks,
                "passed": all(checks.values()),
            }
        )
        print(f"{step}: save at turn {ours['turn']}, {'PASS' if all(checks.values()) else 'FAIL'} {checks}", flush=True)
        write_report(partial=True)

    started = time.time()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    name = f"{time.strftime('%Y-%m-%d')}-{(real_model or 'model').replace('/', '_')}.json"

    def write_report(*, partial: bool, never_written=None) -> dict:
        report = {
            "model": real_model,
            "endpoint": real_url,
            "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "stream": args.stream,
            "max_tokens": MAX_TOKENS,
            "memory_tokens": MEMORY_TOKENS,
            "load_average": os.getloadavg(),
            "seconds": round(time.time() - started, 1),
            "finished": not partial,
            "swiped_away_answer_never_written": never_written,
            "steps": steps,
            "requests": log,
            "passed": (not partial)
            and never_written in (True, "the swipe gave the same text")
            and all(step["passed"] for step in steps),
        }
        (out / name).write_text(json.dumps(report, indent=2, ensure_ascii=False))
        return report

    for index in range(args.turns):
        front.say(ACTIONS[index % len(ACTIONS)], f"turn {index + 1}")
    compare(f"{args.turns} turns", list(range(1, args.turns)))
    swiped_away = front.chat[-1][1]
    front.swipe("swipe")
    swiped = front.chat[-1][1]
    compare("swipe", list(range(1, args.turns)))
    front.chat[5][1] = "You hesitate at the fisherman's door; he laughs and shuts it in your face."
    front.say("I knock again, louder.", "after editing turn 6")
    compare("edit of turn 6", [1, 2, 3, 4, 5])
    del front.chat[4:]
    front.say(MORE[0], "after deleting back to turn 4")
    compare("delete back to turn 4", [1, 2, 3, 4])
    for index, text in enumerate(MORE[1:] + ["I ring the bell myself."]):
        front.say(text, f"more {index + 1}")
    compare("3 more turns", [1, 2, 3, 4, 5, 6, 7])

    if swiped_away == swiped:
        never_written = "the swipe gave the same text"
    else:
        never_written = not Event.objects.filter(game_save=game_save, narrative=swiped_away).exists()
    httpd.shutdown()
    scripted.stop()
    report = write_report(partial=False, never_written=never_written)
    print(f"report: {out / name}; passed: {report['passed']}")
    return 0 if report["passed"] else 1


if __name__ == "__main__":
    raise SystemExit(main())

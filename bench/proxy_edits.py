"""What an edit and a branch switch cost through the memory proxy: model calls, time, snapshots kept.

On a throw-away SQLite database, a living save is played through `POST /v1/chat/completions`
(Django's test client, in this process) for `--exchanges` exchanges, the studio's model the
project's scripted OpenAI-compatible server (tests/llm_server.py: fixed, valid answers to the
living pipeline's extract / consolidate / reflect calls, a narration to every relay), the jobs
run inline (`AXIOM_JOBS_EAGER`), so every model call a request causes is counted against it.
Then, on copies of that chat:

- **edit answer 3** (the front end resends the chat with answer 3's text changed: a swipe of
  the pending answer), once as the proxy does it now (turn 3 edited in place: re-embedded and
  re-extracted) and once as it did before (`sync.MAX_IN_PLACE = -1`: rewound to turn 2 and
  every later turn appended again);
- **branch switch**: the chat of branch B (the same first `--branch-at` exchanges, then
  different ones) and back to branch A: each is a rewind to the branch point and the branch's
  turns appended (the exact state of a save played straight to it).

The counts of model calls are deterministic (the scripted answers); the times are this
machine's under its load (printed). Nothing here is a model's quality.

    .venv/bin/python bench/proxy_edits.py --json bench/data/proxy_edits.json
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import report, setup_django  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--exchanges", type=int, default=30)
    parser.add_argument("--branch-at", type=int, default=20)
    parser.add_argument("--json", default="")
    args = parser.parse_args()
    os.environ["AXIOM_JOBS_EAGER"] = "1"
    workdir = setup_django()

    from django.conf import settings
    from django.contrib.auth.models import Group, User
    from django.test import Client

    import studio.memory.vector as vector_module
    from studio.api.services import api_token_create
    from studio.proxy import sync
    from studio.roles import PLAYTESTERS
    from studio.saves.models import NarratorSnapshot
    from studio.world.models import LoreEntry, MemoryMode, Universe
    from studio.saves.services import save_create
    from tests.fakes import make_vector_memory
    from tests.llm_server import Reply, ScriptedLLMServer, operation_of, scripted_pipeline_responder

    vectors = make_vector_memory(Path(workdir) / "bench-chroma", collection_name="bench")
    vector_module.get_vector_memory = lambda: vectors
    pipeline = scripted_pipeline_responder()
    counter = iter(range(1, 10**9))
    server = ScriptedLLMServer(
        lambda request: (
            pipeline(request)
            if operation_of(request)
            else Reply(content=f"Answer {next(counter)}: the tide turns at the pier.")
        )
    ).start()
    settings.AXIOM_LLM_BASE_URL = server.base_url
    settings.AXIOM_LLM_MODEL = "bench-model"
    settings.AXIOM_JOBS_EAGER = True
    settings.ALLOWED_HOSTS = ["*"]
    user = User.objects.create_user("bench", password="x")
    user.groups.add(Group.objects.get_or_create(name=PLAYTESTERS)[0])
    universe = Universe.objects.create(name="Bench", slug="bench", owner=user)
    LoreEntry.objects.create(universe=universe, entry_id="kael", title="Kaël", kind="character", text="A smuggler.")
    _, key = api_token_create(user=user, name="bench")
    client = Client()
    system = {"role": "system", "content": "You narrate Port Vey.\n{{axiom_memory}}"}

    def send(game_save, turns, pending):
        messages = [system]
        for player_input, answer in turns:
            messages += [{"role": "user", "content": player_input}, {"role": "assistant", "content": answer}]
        messages.append({"role": "user", "content": pending})
        body = {"model": f"axiom/{game_save.save_id}/bench-model", "messages": messages}
        calls = len(server.requests)
        started = time.perf_counter()
        response = client.post(
            "/v1/chat/completions",
            json.dumps(body),
            content_type="application/json",
            headers={"Authorization": f"Bearer {key}"},
        )
        seconds = time.perf_counter() - started
        assert response.status_code == 200, response.content
        made = [operation_of(r) for r in server.requests[calls:]]
        return response.json()["choices"][0]["message"]["content"], seconds, [m for m in made if m]

    def play(name, inputs):
        game_save = save_create(universe=universe, name=name, memory_mode=MemoryMode.LIVING)
        chat = []
        for text in inputs:
            answer, _, _ = send(game_save, chat, text)
            chat.append((text, answer))
        return game_save, chat

    inputs_a = [f"I do thing {n} at the harbour with Kaël." for n in range(1, args.exchanges + 1)]
    results = {"exchanges": args.exchanges, "load_average": os.getloadavg()}
    for mode, limit in (("in place", sync.MAX_IN_PLACE), ("rewind (before)", -1)):
        sync.MAX_IN_PLACE = limit
        game_save, chat = play(f"edit {mode}", inputs_a)
        snapshots = NarratorSnapshot.objects.filter(game_save=game_save).count()
        settled = chat[:-1]
        settled[2] = (settled[2][0], "You hesitate at the pier; the harbour master laughs instead.")
        _, seconds, calls = send(game_save, settled, chat[-1][0])
        results[f"edit answer 3, {mode}"] = {
            "model_calls": len(calls),
            "by_operation": {op: calls.count(op) for op in sorted(set(calls))},
            "seconds": round(seconds, 3),
            "snapshots_before": snapshots,
            "snapshots_after": NarratorSnapshot.objects.filter(game_save=game_save).count(),
        }
    sync.MAX_IN_PLACE = 2
    game_save, chat_a = play("branches", inputs_a)
    branch_b = chat_a[: args.branch_at] + [
        (f"Instead I sail north, step {n}.", f"North {n}.") for n in range(args.exchanges - args.branch_at - 1)
    ]
    for label, turns, pending in (
        ("switch to branch B", branch_b, "I drop anchor."),
        ("switch back to branch A", chat_a[:-1], chat_a[-1][0]),
    ):
        _, seconds, calls = send(game_save, turns, pending)
        game_save.refresh_from_db()
        results[label] = {
            "model_calls": len(calls),
            "seconds": round(seconds, 3),
            "turns_redone": len(turns) - args.branch_at,
            "current_turn": game_save.current_turn,
        }
    server.stop()
    report(results, args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

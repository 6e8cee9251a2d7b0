"""The memory proxy's own cost: time to the first byte of the answer, proxy vs the upstream directly.

On a throw-away SQLite database and embedded Chroma directory, for saves of `--sizes` turns
(default 1,000 and 10,000; classic memory mode, every turn's narrative in the vector store,
a 40-entry Lore Book with keys), the same streamed chat-completions request is sent

- **direct**: to the upstream itself (the project's scripted OpenAI-compatible server,
  tests/llm_server.py, answering at once) with a pooled httpx client, and
- **proxy**: to `POST /v1/chat/completions` through Django's test client, in this process
  (the view, the sync, the memory context, the proposal, the relay; no studio HTTP server),

and the time until the first body byte is taken for each, with the CPU time the proxy's
request took in this thread (the view, sync, memory context and relay run in the calling
thread; the upstream server and the job pool run in others): steadier than wall time on a
loaded machine. The request carries what a front
end with a full context sends: a system prompt with `{{axiom_memory}}`, the save's last
`--window` turns, and a new message. Two kinds are timed, `--repeats` of each:

- **swipe**: the same chat again (the sync finds nothing to change; one proposal written);
- **new message**: the previous answer now in the chat (the sync appends one turn through
  `narrator_accept`: Event, State, lore activation, snapshot; its embedding job is queued to
  the in-process pool and waited for, untimed, before the next request).

The chunk store uses the test suite's hashing embedder (tests/fakes.py), so the 10,000 turns
embed in seconds; the real MiniLM adds one query encode per request (a fixed cost, see
"Query latency"), which is not in these figures. Prints a table and writes `--json`.

    .venv/bin/python bench/proxy_overhead.py --json bench/data/proxy_overhead.json
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import percentile, setup_django  # noqa: E402

WORDS = (
    "harbour tide lantern smuggler ledger debt pier rope salt fog bell chapel reef map coin storm "
    "guild clerk eel net boat oar gull cellar key letter wax seal bridge mill market rain"
).split()
NAMES = ["Kael", "Mira", "Dace", "Hesper", "Corvin", "Anselm", "Tull", "Verrow"]


def narrative(rng: random.Random, turn: int) -> str:
    words = [rng.choice(WORDS) for _ in range(45)]
    words[rng.randrange(45)] = rng.choice(NAMES)
    return f"Turn {turn}: " + " ".join(words) + "."


def build(universe, size: int, vectors, rng):
    from studio.world.models import Event, MemoryMode, Save, StateCache

    game_save = Save.objects.create(universe=universe, name=f"{size} turns", memory_mode=MemoryMode.CLASSIC)
    events, states, chunks = [], [], []
    for turn in range(1, size + 1):
        text = narrative(rng, turn)
        events.append(Event(game_save=game_save, turn_id=turn, player_input=f"I do thing {turn}.", narrative=text))
        states.append(StateCache(game_save=game_save, turn_id=turn, state={}))
        chunks.append({"turn_id": turn, "text": text})
    Event.objects.bulk_create(events, batch_size=1000)
    StateCache.objects.bulk_create(states, batch_size=1000)
    Save.objects.filter(pk=game_save.pk).update(current_turn=size)
    game_save.refresh_from_db()
    vectors.embed_chunks(game_save.save_id, chunks, batch_size=256)
    lore = [{"entry_id": e.entry_id, "text": e.text, "title": e.title} for e in universe.lore_entries.all()]
    if hasattr(vectors, "sync_lore"):
        vectors.sync_lore(game_save.save_id, lore)
    return game_save


def wait_jobs(game_save, timeout=120.0):
    from studio.memory.models import Job, JobStatus

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not Job.objects.filter(game_save=game_save, status__in=(JobStatus.QUEUED, JobStatus.RUNNING)).exists():
            return
        time.sleep(0.05)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="1000,10000")
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--window", type=int, default=20, help="turns of chat the front end sends")
    parser.add_argument("--json", default="")
    args = parser.parse_args()
    workdir = setup_django()
    os.environ.setdefault("AXIOM_JOBS_EAGER", "0")

    import httpx
    from django.conf import settings
    from django.contrib.auth.models import Group, User
    from django.test import Client

    from studio.api.services import api_token_create
    from studio.roles import PLAYTESTERS
    from studio.world.models import LoreEntry, Universe
    from tests.fakes import make_vector_memory
    from tests.llm_server import Reply, ScriptedLLMServer

    vectors = make_vector_memory(Path(workdir) / "bench-chroma", collection_name="bench")
    import studio.memory.vector as vector_module

    vector_module.get_vector_memory = lambda: vectors
    server = ScriptedLLMServer(
        lambda request: Reply(content="The tide turns; Mira closes her ledger and looks up.")
    ).start()
    settings.AXIOM_LLM_BASE_URL = server.base_url
    settings.AXIOM_LLM_MODEL = "bench-model"
    settings.ALLOWED_HOSTS = ["*"]

    user = User.objects.create_user("bench", password="x")
    user.groups.add(Group.objects.get_or_create(name=PLAYTESTERS)[0])
    universe = Universe.objects.create(name="Bench", slug="bench", owner=user)
    rng = random.Random(7)
    for index in range(40):
        name = NAMES[index % len(NAMES)] + (f" {index}" if index >= len(NAMES) else "")
        LoreEntry.objects.create(
            universe=universe,
            entry_id=f"e{index}",
            title=name,
            kind="character",
            text=f"{name} " + " ".join(rng.choice(WORDS) for _ in range(40)),
            keys=[name],
        )
    _, key = api_token_create(user=user, name="bench")
    client = Client()
    direct = httpx.Client(timeout=30)

    def first_byte_direct(body) -> float:
        started = time.perf_counter()
        with direct.stream("POST", server.base_url + "/chat/completions", json=body) as response:
            chunks = response.iter_raw()
            next(chunks)
            elapsed = time.perf_counter() - started
            for _ in chunks:
                pass
        return elapsed

    def first_byte_proxy(body) -> tuple[float, dict]:
        cpu = time.thread_time()
        started = time.perf_counter()
        response = client.post(
            "/v1/chat/completions",
            json.dumps(body),
            content_type="application/json",
            headers={"Authorization": f"Bearer {key}"},
        )
        iterator = iter(response.streaming_content)
        next(iterator)
        elapsed = time.perf_counter() - started
        cpu = time.thread_time() - cpu
        for _ in iterator:
            pass
        response.close()
        timing = {}
        for part in response["X-Axiom-Timing"].split(", "):
            name, _, ms = part.partition("=")
            timing[name] = float(ms) / 1000
        timing["prepare"] = float(response["X-Axiom-Prepare-Ms"]) / 1000
        timing["cpu"] = cpu
        return elapsed, timing

    results = []
    for size in [int(s) for s in args.sizes.split(",")]:
        t0 = time.perf_counter()
        game_save = build(universe, size, vectors, rng)
        setup_s = time.perf_counter() - t0
        system = {"role": "system", "content": "You narrate Port Vey.\n{{axiom_memory}}"}
        chat = [(e.player_input, e.narrative) for e in game_save.events.order_by("-turn_id")[: args.window]][::-1]

        def messages(turns, pending):
            out = [system]
            for player_input, answer in turns:
                out += [{"role": "user", "content": player_input}, {"role": "assistant", "content": answer}]
            return out + [{"role": "user", "content": pending}]

        model = f"axiom/{game_save.save_id}/bench-model"
        samples = {"swipe": {"direct": [], "proxy": []}, "new message": {"direct": [], "proxy": []}}

        def timed(kind, body, direct_body):
            samples[kind]["direct"].append(first_byte_direct(direct_body))
            proxy_s, timing = first_byte_proxy(body)
            samples[kind]["proxy"].append(proxy_s)
            for name, seconds in timing.items():
                samples[kind].setdefault(name, []).append(seconds)

        pending = f"I ask {rng.choice(NAMES)} about the {rng.choice(WORDS)}."
        first_byte_proxy({"model": model, "messages": messages(chat, pending), "stream": True})  # warm-up
        wait_jobs(game_save)
        for _ in range(args.repeats):
            body = {"model": model, "messages": messages(chat, pending), "stream": True}
            timed("swipe", body, {"model": "bench-model", "messages": body["messages"], "stream": True})
        for _ in range(args.repeats):
            chat = (chat + [(pending, "The tide turns; Mira closes her ledger and looks up.")])[-args.window :]
            pending = f"I ask {rng.choice(NAMES)} about the {rng.choice(WORDS)}."
            body = {"model": model, "messages": messages(chat, pending), "stream": True}
            timed("new message", body, {"model": "bench-model", "messages": body["messages"], "stream": True})
            wait_jobs(game_save)
        game_save.refresh_from_db()
        for kind, s in samples.items():
            d50, p50, prep50 = (percentile(s[k], 50) * 1000 for k in ("direct", "proxy", "prepare"))
            row = {
                "turns": size,
                "kind": kind,
                "repeats": args.repeats,
                "direct_p50_ms": round(d50, 2),
                "proxy_p50_ms": round(p50, 2),
                "proxy_p95_ms": round(percentile(s["proxy"], 95) * 1000, 2),
                "prepare_p50_ms": round(prep50, 2),
                "added_p50_ms": round(p50 - d50, 2),
                **{
                    f"{name}_p50_ms": round(percentile(s[name], 50) * 1000, 2)
                    for name in ("sync", "memory", "proposal", "cpu")
                },
                "ratio": round(p50 / d50, 1) if d50 else None,
                "setup_s": round(setup_s, 1),
                "save_turn_after": game_save.current_turn,
            }
            results.append(row)
            print(json.dumps(row), flush=True)
    server.stop()
    load = os.getloadavg()
    print(f"\nload average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    print(
        "| turns | request | direct p50 ms | proxy p50 ms | proxy p95 ms | added p50 ms | sync | memory context | proposal | proxy CPU p50 ms | ratio |"
    )
    print("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in results:
        print(
            f"| {r['turns']:,} | {r['kind']} | {r['direct_p50_ms']} | {r['proxy_p50_ms']} | {r['proxy_p95_ms']} | "
            f"{r['added_p50_ms']} | {r['sync_p50_ms']} | {r['memory_p50_ms']} | {r['proposal_p50_ms']} | {r['cpu_p50_ms']} | {r['ratio']}x |"
        )
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps({"load_average": load, "results": results}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Load test of the studio's JSON API (and its pages) on loopback, under gunicorn.

What it does, all in a temporary directory that is removed afterwards:
1. starts a Chroma server (`chroma run`) so every gunicorn worker shares one vector store;
2. migrates a fresh database (SQLite by default, `--database-url` for PostgreSQL);
3. seeds a universe, a save with `--chunks` turns (one narrative chunk each, embedded with
   the packaged MiniLM through the studio's VectorMemory), facts, beliefs and mental
   models, plus small saves for the append phase; creates API tokens;
4. measures the raw library in the same run: VectorMemory.query called in-process on the
   same Chroma server and corpus (the floor the API adds HTTP, auth and JSON on top of);
5. starts gunicorn (`--workers` x `--threads`, gthread) with the studio;
6. browse + query phase: `--users` concurrent users for `--duration` s, each looping over
   a weighted mix of API reads, memory queries, memory contexts and studio pages, with a
   think time between requests (`--think`, 0 = closed loop, as fast as possible);
7. append phase: `--append-clients` engines appending turns to their own saves for
   `--append-duration` s (turns/s, latency), then the time the background embedding takes
   to catch up.
Reported: requests, error rate, p50 / p95 / p99 overall and per endpoint, and the ratio of
the API's query p50 to the raw in-process query p50.

Run: .venv/bin/python bench/api_load.py [--users 50 --duration 60 --chunks 10000]
     .venv/bin/python bench/api_load.py --quick     (small, for a smoke run)
The client and the server share this machine's cores: the client's own CPU is part of what
is measured (its pure-Python HTTP stack is not free), so the figures are conservative.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from _common import percentile  # noqa: E402

PYTHON = str(ROOT / ".venv" / "bin" / "python")
CHROMA = str(ROOT / ".venv" / "bin" / "chroma")
GUNICORN = str(ROOT / ".venv" / "bin" / "gunicorn")

CHARACTERS = [
    "Kael",
    "Mira",
    "Orsolya",
    "Bram",
    "Tamsin",
    "Idris",
    "Vell",
    "Corwin",
    "Nessa",
    "Jory",
    "Halvard",
    "Sefa",
    "Ysolde",
    "Pell",
    "Rook",
    "Anselm",
]
PLACES = [
    "Port Vey",
    "the Drowned Lantern",
    "the salt marsh",
    "the lighthouse",
    "Greywater Keep",
    "the fish market",
    "the old chapel",
    "the smugglers' cave",
    "the harbour wall",
    "the tide mill",
]
ITEMS = [
    "a crate of lamp oil",
    "the silver compass",
    "a sealed letter",
    "ten crowns",
    "the harbour ledger",
    "a rusted key",
    "a map of the reefs",
    "the guild seal",
    "a bottle of black rum",
    "a wax tablet",
]
ACTIONS = [
    "bargains over",
    "hides",
    "steals",
    "returns",
    "burns",
    "sells",
    "examines",
    "buries",
    "loses",
    "swears an oath on",
]
MOODS = [
    "The fog rolls in from the sea.",
    "Rain hammers the shutters.",
    "Gulls scream over the quay.",
    "A bell tolls somewhere inland.",
    "The tide is turning.",
    "Lanterns sway in the wind.",
]
SAVE_PASSWORD = "bench-password"


def narrative(rng: random.Random, turn: int) -> tuple[str, list[str]]:
    a, b = rng.sample(CHARACTERS, 2)
    place, item, action = rng.choice(PLACES), rng.choice(ITEMS), rng.choice(ACTIONS)
    text = (
        f"{a} {action} {item} at {place} while {b} keeps watch. {rng.choice(MOODS)} "
        f"{b} remembers what happened at {rng.choice(PLACES)} and says nothing. "
        f"By nightfall {a} owes {b} a favour (turn {turn})."
    )
    return text, [a, b]


def query_texts(rng: random.Random, n: int = 300) -> list[str]:
    templates = [
        "What did {a} do with {item}?",
        "{a} at {place}",
        "Who keeps watch for {a}?",
        "the favour {a} owes {b}",
        "{item} {place}",
        "Where was {a} when the fog rolled in?",
    ]
    out = []
    for _ in range(n):
        a, b = rng.sample(CHARACTERS, 2)
        out.append(rng.choice(templates).format(a=a, b=b, item=rng.choice(ITEMS), place=rng.choice(PLACES)))
    return out


# --- seeding (runs in a child process with the bench environment) ------------------------


def seed(args: dict) -> dict:
    import django

    django.setup()
    from django.contrib.auth.models import Group, User

    from studio.api.services import api_token_create
    from studio.memory.models import Fact, MentalModel, Observation, entity_index_for
    from studio.memory.vector import get_vector_memory
    from studio.roles import PLAYTESTERS
    from studio.world.models import Event, LoreEntry, Save, StateCache, Universe

    rng = random.Random(args["seed"])
    chunks = args["chunks"]
    started = time.perf_counter()
    universe = Universe.objects.create(name="Load Reach", slug="load-reach")
    for name in CHARACTERS:
        LoreEntry.objects.create(
            universe=universe,
            entry_id=name.lower(),
            title=name,
            kind="character",
            text=f"{name} is a regular of {rng.choice(PLACES)}.",
        )
    save = Save.objects.create(universe=universe, name="Long campaign", save_id="loadsave", memory_mode="living")
    texts = []
    events, states, facts = [], [], []
    for turn in range(1, chunks + 1):
        text, names = narrative(rng, turn)
        texts.append(text)
        events.append(Event(game_save=save, turn_id=turn, player_input=f"I follow {names[0]}.", narrative=text))
        states.append(StateCache(game_save=save, turn_id=turn, state={"turn": turn, "place": rng.choice(PLACES)}))
        for who in names:
            facts.append(
                Fact(
                    game_save=save,
                    turn_id=turn,
                    statement=f"{who} was at turn {turn}.",
                    who=who,
                    entities=[who],
                    entity_index=entity_index_for([who]),
                )
            )
    Event.objects.bulk_create(events, batch_size=2000)
    StateCache.objects.bulk_create(states, batch_size=2000)
    Fact.objects.bulk_create(facts, batch_size=2000)
    fact_rows = list(Fact.objects.filter(game_save=save).values_list("id", "turn_id", "who"))
    by_who = defaultdict(list)
    for fact_id, turn_id, who in fact_rows:
        by_who[who].append({"fact_id": fact_id, "turn_id": turn_id})
    for who in CHARACTERS:
        for i in range(15):
            sources = rng.sample(by_who[who], min(6, len(by_who[who])))
            last = max(s["turn_id"] for s in sources)
            Observation.objects.create(
                game_save=save,
                statement=f"{who} belief {i}.",
                subject=who,
                sources=sources,
                created_turn_id=min(s["turn_id"] for s in sources),
                updated_turn_id=last,
            )
        MentalModel.objects.create(
            game_save=save,
            subject=who,
            summary=f"{who}, a regular of the harbour.",
            created_turn_id=1,
            updated_turn_id=chunks,
        )
    save.current_turn = chunks
    save.save()
    db_seconds = time.perf_counter() - started

    vm = get_vector_memory()
    started = time.perf_counter()
    vm.embed_chunks(save.save_id, [{"turn_id": t + 1, "text": text} for t, text in enumerate(texts)], batch_size=64)
    vm.embed_chunks(
        save.save_id,
        [
            {"turn_id": 0, "text": e.text, "chunk_type": "lore", "metadata_extra": {"entry_id": e.entry_id}}
            for e in universe.lore_entries.all()
        ],
    )
    embed_seconds = time.perf_counter() - started

    group = Group.objects.get(name=PLAYTESTERS)
    keys, usernames = [], []
    for i in range(args["users"]):
        user = User.objects.create_user(f"user{i}", password=SAVE_PASSWORD)
        user.groups.add(group)
        universe.members.add(user)
        keys.append(api_token_create(user=user, name="bench")[1])
        usernames.append(user.username)
    append_saves = []
    for i in range(args["append_clients"]):
        s = Save.objects.create(universe=universe, name=f"Append {i}", save_id=f"append{i}")
        append_saves.append(s.save_id)

    return {
        "save_id": save.save_id,
        "chunk_count": vm.count(save.save_id),
        "keys": keys,
        "usernames": usernames,
        "append_saves": append_saves,
        "seed_db_seconds": round(db_seconds, 2),
        "seed_embed_seconds": round(embed_seconds, 2),
    }


def measure_raw(args: dict) -> dict:
    """Time VectorMemory.query in-process on the same Chroma server and corpus (the raw library).

    Runs in every bench run (also when the seeded data is reused), before gunicorn starts,
    after a warm-up query that loads the corpus and the model.
    """
    import django

    django.setup()
    from studio.memory.vector import get_vector_memory

    vm = get_vector_memory()
    queries = query_texts(random.Random(args["seed"] + 1), 100)
    vm.query(args["save_id"], queries[0], k=5, current_turn_id=args["chunks"])
    raw, stages = [], defaultdict(list)
    for text in queries:
        t0 = time.perf_counter()
        outcome = vm.query_explained(args["save_id"], text, k=5, current_turn_id=args["chunks"])
        raw.append(time.perf_counter() - t0)
        for stage, ms in outcome.stats.timings_ms.items():
            stages[stage].append(ms / 1000)
    return {
        "p50": percentile(raw, 50) * 1000,
        "p95": percentile(raw, 95) * 1000,
        "stage_p50_ms": {stage: round(percentile(values, 50) * 1000, 2) for stage, values in stages.items()},
    }


# --- processes -----------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(url: str, timeout: float, proc: subprocess.Popen) -> None:
    import httpx

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{proc.args[0]} exited with {proc.returncode}")
        try:
            if httpx.get(url, timeout=2).status_code < 500:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.3)
    raise RuntimeError(f"{url} did not come up in {timeout} s")


def stop(proc: subprocess.Popen | None) -> None:
    if proc is None or proc.poll() is not None:
        return
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


# --- load ----------------------------------------------------------------------------------


class Recorder:
    def __init__(self):
        self.lock = threading.Lock()
        self.samples: dict[str, list[float]] = defaultdict(list)
        self.errors: dict[str, int] = defaultdict(int)
        self.error_examples: list[str] = []

    def record(self, name: str, seconds: float, ok: bool, detail: str = "") -> None:
        with self.lock:
            self.samples[name].append(seconds)
            if not ok:
                self.errors[name] += 1
                if len(self.error_examples) < 10:
                    self.error_examples.append(f"{name}: {detail}")

    def summary(self) -> dict:
        every = [s for samples in self.samples.values() for s in samples]
        total_errors = sum(self.errors.values())
        per = {}
        for name, samples in sorted(self.samples.items()):
            per[name] = {
                "requests": len(samples),
                "errors": self.errors.get(name, 0),
                "p50_ms": round(percentile(samples, 50) * 1000, 1),
                "p95_ms": round(percentile(samples, 95) * 1000, 1),
                "p99_ms": round(percentile(samples, 99) * 1000, 1),
            }
        return {
            "requests": len(every),
            "errors": total_errors,
            "error_rate": round(total_errors / len(every), 5) if every else None,
            "p50_ms": round(percentile(every, 50) * 1000, 1),
            "p95_ms": round(percentile(every, 95) * 1000, 1),
            "p99_ms": round(percentile(every, 99) * 1000, 1),
            "per_endpoint": per,
            "error_examples": self.error_examples,
        }


def login(client, username: str) -> bool:
    page = client.get("/accounts/login/", timeout=120)
    token = client.cookies.get("csrftoken")
    response = client.post(
        "/accounts/login/",
        data={"username": username, "password": SAVE_PASSWORD, "csrfmiddlewaretoken": token},
        headers={"Referer": str(page.url)},
        timeout=120,
    )
    return response.status_code in (302, 303)


def open_clients(base: str, key: str, username: str, pages: bool):
    """Return a user's API client and, for pages, a logged-in browser client (or None)."""
    import httpx

    api = httpx.Client(base_url=base, headers={"Authorization": f"Bearer {key}"}, timeout=30)
    browser = httpx.Client(base_url=base, timeout=30, follow_redirects=False) if pages else None
    if browser is not None and not login(browser, username):
        raise RuntimeError(f"{username} could not log in")
    return api, browser


def open_all_clients(base: str, seeded: dict, users: int, pages: bool) -> list:
    """Log every user in before the clock starts (a password hash costs real CPU)."""
    clients: list = [None] * users
    gate = threading.Semaphore(4)  # a few at a time: each login runs the password hasher

    def one(i: int) -> None:
        with gate:
            clients[i] = open_clients(base, seeded["keys"][i], seeded["usernames"][i], pages)

    run_phase([threading.Thread(target=one, args=(i,)) for i in range(users)])
    if any(c is None for c in clients):
        raise RuntimeError("some users could not log in")
    return clients


def user_loop(
    clients, save_id: str, chunks: int, deadline: float, think: float, recorder: Recorder, seed: int, mix: str = "all"
) -> None:
    import httpx

    rng = random.Random(seed)
    queries = query_texts(rng, 200)
    api, browser = clients
    api_base = f"/api/v1/saves/{save_id}"

    def offset() -> int:
        return rng.randrange(0, max(1, chunks - 50))

    actions = [
        (10, "api save", lambda: api.get(api_base)),
        (8, "api turns page", lambda: api.get(f"{api_base}/turns", params={"offset": offset(), "limit": 20})),
        (8, "api facts", lambda: api.get(f"{api_base}/facts", params={"entity": rng.choice(CHARACTERS), "limit": 20})),
        (8, "api beliefs", lambda: api.get(f"{api_base}/beliefs", params={"subject": rng.choice(CHARACTERS)})),
        (5, "api mental models", lambda: api.get(f"{api_base}/mental-models")),
        (4, "api jobs", lambda: api.get(f"{api_base}/jobs")),
        (
            30,
            "api query",
            lambda: api.post(
                f"{api_base}/query",
                json={
                    "query_text": rng.choice(queries),
                    "k": 5,
                    "focus_terms": [rng.choice(CHARACTERS)] if rng.random() < 0.5 else None,
                },
            ),
        ),
        (
            7,
            "api context",
            lambda: api.post(
                f"{api_base}/context", json={"query_text": rng.choice(queries), "focus_terms": [rng.choice(CHARACTERS)]}
            ),
        ),
    ]
    if browser is not None:
        actions += [
            (5, "page save", lambda: browser.get(f"/saves/{save_id}/")),
            (5, "page timeline", lambda: browser.get(f"/saves/{save_id}/timeline/")),
            (4, "page beliefs", lambda: browser.get(f"/memory/{save_id}/beliefs/")),
            (3, "page facts", lambda: browser.get(f"/memory/{save_id}/facts/")),
        ]
    if mix == "browse":
        actions = [a for a in actions if a[1] not in {"api query", "api context"}]
    weights = [w for w, _, _ in actions]
    while time.monotonic() < deadline:
        _, name, call = rng.choices(actions, weights=weights)[0]
        t0 = time.perf_counter()
        try:
            response = call()
            ok = response.status_code < 400
            detail = f"{response.status_code} {response.text[:120]}"
        except httpx.HTTPError as exc:
            ok, detail = False, repr(exc)[:160]
        recorder.record(name, time.perf_counter() - t0, ok, detail)
        if think > 0:
            time.sleep(rng.uniform(0.5 * think, 1.5 * think))
    api.close()
    if browser is not None:
        browser.close()


def append_loop(base: str, key: str, save_id: str, deadline: float, recorder: Recorder, seed: int) -> None:
    import httpx

    rng = random.Random(seed)
    client = httpx.Client(base_url=base, headers={"Authorization": f"Bearer {key}"}, timeout=30)
    turn = client.get(f"/api/v1/saves/{save_id}").json()["current_turn"]
    while time.monotonic() < deadline:
        turn += 1
        text, names = narrative(rng, turn)
        t0 = time.perf_counter()
        try:
            response = client.post(
                f"/api/v1/saves/{save_id}/turns",
                json={
                    "player_input": f"I follow {names[0]}.",
                    "narrative": text,
                    "state": {"turn": turn},
                    "turn_id": turn,
                },
            )
            ok = response.status_code == 201
            detail = f"{response.status_code} {response.text[:120]}"
        except httpx.HTTPError as exc:
            ok, detail = False, repr(exc)[:160]
        recorder.record("api append turn", time.perf_counter() - t0, ok, detail)
        if not ok:
            turn -= 1
    client.close()


def warm_up(base: str, key: str, save_id: str, concurrency: int, limit: float = 180.0) -> dict:
    import httpx

    queries = query_texts(random.Random(99), 500)
    started = time.perf_counter()
    rounds = 0
    while True:
        rounds += 1
        latencies: list[float] = []

        def one(text: str) -> None:
            t0 = time.perf_counter()
            with httpx.Client(base_url=base, headers={"Authorization": f"Bearer {key}"}, timeout=120) as client:
                client.post(f"/api/v1/saves/{save_id}/query", json={"query_text": text, "k": 5})
                client.post(f"/api/v1/saves/{save_id}/context", json={"query_text": text})
            latencies.append(time.perf_counter() - t0)

        threads = [
            threading.Thread(target=one, args=(queries[(rounds * concurrency + i) % 500],)) for i in range(concurrency)
        ]
        run_phase(threads)
        slowest = max(latencies)
        if (rounds >= 3 and slowest < 2.0) or time.perf_counter() - started > limit:
            return {
                "rounds": rounds,
                "seconds": round(time.perf_counter() - started, 1),
                "last_round_max_s": round(slowest, 2),
            }


def run_phase(threads: list[threading.Thread]) -> float:
    started = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return time.perf_counter() - started


def wait_jobs_drained(base: str, key: str, save_ids: list[str], timeout: float) -> float | None:
    """Return the seconds until no job of these saves is queued or running (None on timeout)."""
    import httpx

    client = httpx.Client(base_url=base, headers={"Authorization": f"Bearer {key}"}, timeout=30)
    started = time.perf_counter()
    while time.perf_counter() - started < timeout:
        pending = 0
        for save_id in save_ids:
            for status in ("queued", "running"):
                body = client.get(f"/api/v1/saves/{save_id}/jobs", params={"status": status, "limit": 1}).json()
                pending += len(body["items"])
        if not pending:
            return time.perf_counter() - started
        time.sleep(1)
    return None


def job_outcomes(base: str, key: str, save_ids: list[str]) -> dict[str, int]:
    import httpx

    client = httpx.Client(base_url=base, headers={"Authorization": f"Bearer {key}"}, timeout=30)
    counts: dict[str, int] = defaultdict(int)
    for save_id in save_ids:
        offset = 0
        while offset is not None:
            body = client.get(f"/api/v1/saves/{save_id}/jobs", params={"limit": 200, "offset": offset}).json()
            for job in body["items"]:
                counts[job["status"]] += 1
            offset = body["next_offset"]
    return dict(counts)


def markdown(report: dict) -> str:
    """Return the report as the Markdown tables docs/benchmarks.md carries."""
    config, seed_info = report["config"], report["seed"]
    browse, append = report["browse_and_query"], report["append"]
    lines = [
        (
            f"Run: {config['users']} users, {config['duration']:.0f} s, think time {config['think']} s, "
            f"{seed_info['chunk_count']} chunks, gunicorn {config['workers']} workers x {config['threads']} threads, "
            f"database {'PostgreSQL' if config['database_url'] else 'SQLite'}, Chroma server, mix {config.get('mix', 'all')}"
            f"{', no pages' if config.get('no_pages') else ''}; "
            f"load average before/after {report.get('load_average_before')}/{report.get('load_average_after')}."
        ),
        "",
        "| endpoint | requests | errors | p50 ms | p95 ms | p99 ms |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for name, row in browse["per_endpoint"].items():
        lines.append(
            f"| {name} | {row['requests']} | {row['errors']} | {row['p50_ms']} | {row['p95_ms']} | {row['p99_ms']} |"
        )
    lines.append(
        f"| **all** | {browse['requests']} | {browse['errors']} | {browse['p50_ms']} | {browse['p95_ms']} | {browse['p99_ms']} |"
    )
    lines += [
        "",
        (
            f"Throughput {browse['throughput_rps']} req/s, error rate {browse['error_rate']}. Raw in-process "
            f"VectorMemory.query on the same store: p50 {seed_info['raw_query_ms']['p50']:.1f} ms, p95 "
            f"{seed_info['raw_query_ms']['p95']:.1f} ms (stage p50s, ms: {seed_info['raw_query_ms'].get('stage_p50_ms')}); "
            f"API query p50 / raw p50 = {browse['query_p50_vs_raw_in_process']}."
        ),
        (
            f"Append: {config['append_clients']} engines, {append['turns_per_second']} turns/s, p50 {append['p50_ms']} ms, "
            f"p95 {append['p95_ms']} ms, {append['errors']} errors; background embedding caught up "
            f"{append['embedding_caught_up_after_s']} s after the last append; jobs {append['jobs']}."
        ),
    ]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--users", type=int, default=50)
    parser.add_argument("--duration", type=float, default=60.0)
    parser.add_argument("--chunks", type=int, default=10_000)
    parser.add_argument(
        "--think", type=float, default=1.0, help="mean think time between a user's requests (s); 0 = closed loop"
    )
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--append-clients", type=int, default=4)
    parser.add_argument("--append-duration", type=float, default=20.0)
    parser.add_argument("--no-pages", action="store_true", help="API requests only, no studio pages")
    parser.add_argument(
        "--mix",
        choices=["all", "browse"],
        default="all",
        help="browse = everything but memory queries and contexts (to separate their cost)",
    )
    parser.add_argument("--workdir", default="", help="keep the seeded data here and reuse it on the next run")
    parser.add_argument("--keep-alive", type=int, default=30, help="gunicorn keep-alive seconds")
    parser.add_argument("--database-url", default="", help="default: a fresh SQLite file")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--quick", action="store_true", help="small smoke run (10 users, 10 s, 500 chunks)")
    parser.add_argument("--out", default="", help="also write the JSON report here")
    parser.add_argument("--markdown", default="", help="print the Markdown tables of a saved JSON report and exit")
    parser.add_argument("--_seed", default="", help=argparse.SUPPRESS)
    parser.add_argument("--_raw", default="", help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.markdown:
        print(markdown(json.loads(Path(args.markdown).read_text())))
        return 0
    if args._seed:
        print("SEED-RESULT " + json.dumps(seed(json.loads(args._seed))), flush=True)
        return 0
    if args._raw:
        print("RAW-RESULT " + json.dumps(measure_raw(json.loads(args._raw))), flush=True)
        return 0
    if args.quick:
        args.users, args.duration, args.chunks, args.append_duration = 10, 10.0, 500, 5.0

    workdir = args.workdir or tempfile.mkdtemp(prefix="axiom-api-load-")
    Path(workdir).mkdir(parents=True, exist_ok=True)
    seed_file = Path(workdir) / "seed.json"
    chroma_port, http_port = free_port(), free_port()
    env = dict(os.environ)
    env.update(
        SECRET_KEY="bench-only-secret-key-" + os.urandom(8).hex(),
        DEBUG="0",
        SECURE_SSL_REDIRECT="0",
        SESSION_COOKIE_SECURE="0",
        CSRF_COOKIE_SECURE="0",
        ALLOWED_HOSTS="127.0.0.1,localhost",
        AXIOM_VAR_DIR=workdir,
        DATABASE_URL=args.database_url or f"sqlite:///{workdir}/studio.sqlite3",
        CHROMA_HOST="127.0.0.1",
        CHROMA_PORT=str(chroma_port),
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        ANONYMIZED_TELEMETRY="False",
        DJANGO_SETTINGS_MODULE="studio.settings",
        LOG_LEVEL="WARNING",
        OMP_NUM_THREADS=env.get("OMP_NUM_THREADS", "1"),
        REDIS_URL="",
    )
    if args.database_url:
        # Reuse PostgreSQL connections across requests, as a production set-up would.
        env.setdefault("DATABASE_CONN_MAX_AGE", "60")
    chroma = gunicorn = None
    report: dict = {
        "config": {k: v for k, v in vars(args).items() if k not in {"_seed", "_raw", "out", "markdown", "workdir"}}
    }
    try:
        chroma = subprocess.Popen(
            [CHROMA, "run", "--path", f"{workdir}/chroma", "--host", "127.0.0.1", "--port", str(chroma_port)],
            stdout=open(f"{workdir}/chroma.log", "w"),
            stderr=subprocess.STDOUT,
            cwd=ROOT,
        )
        wait_for(f"http://127.0.0.1:{chroma_port}/api/v2/heartbeat", 60, chroma)
        seed_args = {
            "chunks": args.chunks,
            "users": args.users,
            "append_clients": args.append_clients,
            "seed": args.seed,
        }
        previous = json.loads(seed_file.read_text()) if seed_file.exists() else None
        if previous is not None and not (
            previous["args"]["chunks"] == args.chunks
            and previous["args"]["seed"] == args.seed
            and previous["args"]["users"] >= args.users
            and previous["args"]["append_clients"] >= args.append_clients
        ):
            raise SystemExit(f"{workdir} was seeded with {previous['args']}; use another --workdir for {seed_args}")
        if previous is not None:
            print(f"reusing the data seeded in {workdir}", flush=True)
            seeded = previous["seeded"]
        else:
            subprocess.run([PYTHON, "manage.py", "migrate", "--noinput", "-v", "0"], env=env, cwd=ROOT, check=True)
            print(f"seeding {args.chunks} turns/chunks ...", flush=True)
            out = subprocess.run(
                [PYTHON, __file__, "--_seed", json.dumps(seed_args)],
                env=env,
                cwd=ROOT,
                check=True,
                capture_output=True,
                text=True,
            )
            seeded = json.loads(next(line for line in out.stdout.splitlines() if line.startswith("SEED-RESULT "))[12:])
            seed_file.write_text(json.dumps({"args": seed_args, "seeded": seeded}))
        raw_args = {"save_id": seeded["save_id"], "chunks": args.chunks, "seed": args.seed}
        out = subprocess.run(
            [PYTHON, __file__, "--_raw", json.dumps(raw_args)],
            env=env,
            cwd=ROOT,
            check=True,
            capture_output=True,
            text=True,
        )
        seeded["raw_query_ms"] = json.loads(
            next(line for line in out.stdout.splitlines() if line.startswith("RAW-RESULT "))[11:]
        )
        report["seed"] = {k: v for k, v in seeded.items() if k not in {"keys", "usernames", "append_saves"}}
        print(f"seeded: {report['seed']}", flush=True)

        gunicorn = subprocess.Popen(
            [
                GUNICORN,
                "studio.wsgi:application",
                "--bind",
                f"127.0.0.1:{http_port}",
                "--workers",
                str(args.workers),
                "--worker-class",
                "gthread",
                "--threads",
                str(args.threads),
                "--timeout",
                "120",
                "--keep-alive",
                str(args.keep_alive),
                "--access-logfile",
                "-" if os.environ.get("BENCH_ACCESS_LOG") else "/dev/null",
                "--error-logfile",
                f"{workdir}/gunicorn.log",
            ],
            env=env,
            cwd=ROOT,
        )
        base = f"http://127.0.0.1:{http_port}"
        wait_for(f"{base}/healthz", 120, gunicorn)

        # Warm every worker: each loads the model and the save's corpus on its first query.
        # Rounds of a few concurrent queries (enough to reach every worker) until a whole
        # round answers within two seconds.
        print("warming up ...", flush=True)
        report["warmup"] = warm_up(base, seeded["keys"][0], seeded["save_id"], 2 * args.workers)
        print(f"warm: {report['warmup']}", flush=True)
        report["load_average_before"] = os.getloadavg()

        print(f"browse + query: {args.users} users for {args.duration:.0f} s (think {args.think} s) ...", flush=True)
        clients = open_all_clients(base, seeded, args.users, not args.no_pages)
        recorder = Recorder()
        deadline = time.monotonic() + args.duration
        threads = [
            threading.Thread(
                target=user_loop,
                args=(
                    clients[i],
                    seeded["save_id"],
                    args.chunks,
                    deadline,
                    args.think,
                    recorder,
                    args.seed * 100 + i,
                    args.mix,
                ),
            )
            for i in range(args.users)
        ]
        elapsed = run_phase(threads)
        browse = recorder.summary()
        browse["seconds"] = round(elapsed, 1)
        browse["throughput_rps"] = round(browse["requests"] / elapsed, 1)
        query_p50 = browse["per_endpoint"].get("api query", {}).get("p50_ms")
        raw_p50 = seeded["raw_query_ms"]["p50"]
        browse["query_p50_vs_raw_in_process"] = round(query_p50 / raw_p50, 2) if query_p50 and raw_p50 else None
        report["browse_and_query"] = browse

        print(f"append: {args.append_clients} engines for {args.append_duration:.0f} s ...", flush=True)
        appender = Recorder()
        deadline = time.monotonic() + args.append_duration
        append_threads = [
            threading.Thread(
                target=append_loop,
                args=(base, seeded["keys"][i], seeded["append_saves"][i], deadline, appender, 5000 + i),
            )
            for i in range(args.append_clients)
        ]
        elapsed = run_phase(append_threads)
        append = appender.summary()
        append["seconds"] = round(elapsed, 1)
        append["turns_per_second"] = round((append["requests"] - append["errors"]) / elapsed, 1)
        drained = wait_jobs_drained(base, seeded["keys"][0], seeded["append_saves"], timeout=600)
        append["embedding_caught_up_after_s"] = round(drained, 1) if drained is not None else None
        append["jobs"] = job_outcomes(base, seeded["keys"][0], seeded["append_saves"])
        report["append"] = append
        report["load_average_after"] = os.getloadavg()
    finally:
        stop(gunicorn)
        stop(chroma)
        if not args.workdir:
            shutil.rmtree(workdir, ignore_errors=True)

    print(json.dumps(report, indent=2))
    if args.out:
        Path(args.out).write_text(json.dumps(report, indent=2))
    browse = report["browse_and_query"]
    print(
        f"\nSUMMARY browse+query: {browse['requests']} requests, error rate {browse['error_rate']}, "
        f"p50 {browse['p50_ms']} ms, p95 {browse['p95_ms']} ms, {browse['throughput_rps']} req/s; "
        f"API query p50 = {browse['query_p50_vs_raw_in_process']} x raw in-process VectorMemory.query "
        f"({report['seed']['raw_query_ms']['p50']:.1f} ms)"
    )
    append = report["append"]
    print(
        f"SUMMARY append: {append['turns_per_second']} turns/s, p50 {append['p50_ms']} ms, p95 {append['p95_ms']} ms, "
        f"errors {append['errors']}, embedding caught up after {append['embedding_caught_up_after_s']} s, jobs {append['jobs']}"
    )
    print("\n" + markdown(report) + "\n")
    target_met = browse["errors"] == 0 and browse["p95_ms"] < 300
    print(f"TARGET (no errors, p95 < 300 ms): {'met' if target_met else 'NOT met'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Benchmark: the Lore health page and the key tester on a big book and a long save.

A book of `--entries` entries (default 5,000) with `--keys` keys each (default 10) and a
save of `--turns` turns (default 300), built by bench/lore_activation.py's generators in a
throw-away SQLite database, scan depth 41 messages (a 20-turn window).

Measured in the same run:
- health: `lore_health(universe, saves=[save])` end to end: the book checks, the book
  compiled once, every turn replayed through `activate()` (the message cache means each
  message is scanned once by the automaton), the report built;
- naive replay: what a page without the compiled matcher would do for the same turns: for
  every turn, every entry's keys as its own precompiled regex searched over the turn's
  20-turn window (bench/lore_activation.py's `PerEntryRegexLoop`, the matching alone,
  without any activation logic);
- key tester: `lore_key_test` for a pasted text against the same book (warm: the book is
  compiled once per book version), median of `--repeat` runs.

Usage (from the project root):
    .venv/bin/python bench/lore_health.py [--entries 5000] [--keys 10] [--turns 300]
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import setup_django  # noqa: E402
from lore_activation import PerEntryRegexLoop, build_book, build_chat  # noqa: E402

WINDOW_TURNS = 20


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--entries", type=int, default=5000)
    parser.add_argument("--keys", type=int, default=10)
    parser.add_argument("--turns", type=int, default=300)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    setup_django()
    from django.contrib.auth.models import User

    from studio.world.models import Event, LoreEntry, Save, Universe, UniverseMeta
    from studio.universes.lore_health import lore_health
    from studio.universes.lore_tester import lore_key_test

    rng = random.Random(args.seed)
    specs, all_keys = build_book(args.entries, args.keys, rng)
    chat = build_chat(args.turns, all_keys, rng)
    owner = User.objects.create_user("bench")
    universe = Universe.objects.create(name="Bench", slug="bench", owner=owner)
    UniverseMeta.objects.create(universe=universe, key="lore_scan_depth", value=str(2 * WINDOW_TURNS + 1))
    LoreEntry.objects.bulk_create(
        [
            LoreEntry(
                universe=universe,
                entry_id=s.entry_id,
                title=s.title,
                text=s.text,
                keys=list(s.keys),
                secondary_keys=list(s.secondary_keys),
                constant=s.constant,
                inclusion_group=s.inclusion_group,
                probability=s.probability,
                insertion_order=s.insertion_order,
                token_count=s.token_count,
            )
            for s in specs
        ],
        batch_size=1000,
    )
    save = Save.objects.create(universe=universe, name="Long run", save_id="benchsave", current_turn=len(chat))
    Event.objects.bulk_create(
        [Event(game_save=save, turn_id=t, player_input=i, narrative=n) for t, i, n in chat], batch_size=1000
    )
    print(f"book: {len(specs):,} entries, {len(all_keys):,} keys; save: {len(chat)} turns; window {WINDOW_TURNS} turns")
    print("load:", os.popen("uptime").read().strip())

    started, cpu = time.perf_counter(), time.process_time()
    report = lore_health(universe=universe, saves=[save])
    health_wall, health_cpu = time.perf_counter() - started, time.process_time() - cpu
    print(
        f"health (book checks + replay of {report.turns} turns, first run, compiles the book): "
        f"{health_wall * 1000:.0f} ms wall, {health_cpu * 1000:.0f} ms CPU; "
        f"{len(report.costs):,} entries activated, {len(report.never_activated):,} never"
    )
    started, cpu = time.perf_counter(), time.process_time()
    lore_health(universe=universe, saves=[save])
    again_wall, again_cpu = time.perf_counter() - started, time.process_time() - cpu
    print(
        f"health again (book cached): {again_wall * 1000:.0f} ms wall, {again_cpu * 1000:.0f} ms CPU "
        f"({again_cpu / max(1, report.turns) * 1000:.2f} ms CPU a turn)"
    )

    loop = PerEntryRegexLoop(specs)
    started, cpu = time.perf_counter(), time.process_time()
    for turn, player_input, _narrative in chat:
        window = [t for t in chat[max(0, turn - 1 - WINDOW_TURNS) : turn - 1]]
        buffer = "\n".join([player_input, *(f"{i}\n{n}" for _t, i, n in reversed(window))])
        loop.run(buffer)
    naive_wall, naive_cpu = time.perf_counter() - started, time.process_time() - cpu
    print(
        f"naive replay (per-entry regex over each turn's window, matching only): "
        f"{naive_wall * 1000:.0f} ms wall, {naive_cpu * 1000:.0f} ms CPU"
    )
    print(f"ratio naive / health (CPU, book cached): {naive_cpu / again_cpu:.1f}x")

    text = " ".join(rng.choice(all_keys) if rng.random() < 0.05 else "the" for _ in range(80))
    times = []
    for _ in range(args.repeat):
        started = time.perf_counter()
        result = lore_key_test(universe=universe, text=text)
        times.append(time.perf_counter() - started)
    print(
        f"key tester ({len(result.included)} included, {len(result.considered)} considered of "
        f"{result.total:,}): p50 {statistics.median(times) * 1000:.1f} ms"
    )


if __name__ == "__main__":
    main()

"""Benchmark: lore activation on a big book, beside a loop that tests each entry with its own regex.

The book: `--entries` entries (default 5,000) with `--keys` keys each (default 10: one to
three pseudo-words, like names and places), SillyTavern's defaults (case-insensitive
substring keys); 20% have two secondary keys, 0.2% are constant, 1% carry one regex key, 5%
are in one of 50 inclusion groups, 5% roll a probability. The chat: `--turns` synthetic turns
(player input 15 words, narration 80 words) of ordinary words in which 1% of the words
are keys (about one key per turn). Entry texts are 40 words, 1% of them other entries' keys. Each measured turn
scans a 20-turn window: scan depth 41 messages (the pending input plus 20 turns).

Measured side by side on the same book and turns:
- engine, cold: `activate()` with the message cache cleared first, so all 41 messages are
  scanned by the one Aho-Corasick automaton per case mode (regex keys separately), plus the
  whole activation logic (secondary logic, groups, probability, recursion, an explanation
  for every entry). The book's own caches (the automaton, each entry text's keys, used by
  recursion) are built once per book version and stay, as in the studio;
- engine, warm: consecutive turns with the compiled book's message cache, as in play (only
  the new messages are scanned);
- per-entry regex loop: each entry's primary and secondary keys as one precompiled regex
  per entry (alternation, IGNORECASE), `search()` over the same 41-message buffer, entry by
  entry: the matching step alone, without any of the activation logic.
- per-key substring loop: SillyTavern's own algorithm (`haystack.includes(key)` key by key
  over the lowercased buffer), for context.
The first pass of the engine (recursion off) must find exactly the entries whose primary
keys the loops find; the script checks it on every turn. Wall and CPU time are both shown:
on a shared machine the CPU time is the steadier figure.

Usage (from the project root):
    .venv/bin/python bench/lore_activation.py [--entries 5000] [--keys 10] [--turns 60] [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
import random
import re
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from studio.memory.lore_activation import (  # noqa: E402
    CompiledBook,
    LoreDefaults,
    LoreSpec,
    activate,
    activation_seed,
    scan_messages,
)

SYLLABLES = [
    "ka",
    "el",
    "vo",
    "ra",
    "mi",
    "to",
    "sha",
    "run",
    "dor",
    "bel",
    "ith",
    "ou",
    "zan",
    "qua",
    "per",
    "lis",
    "gon",
    "fae",
    "ryn",
    "tal",
    "mor",
    "wen",
    "gar",
    "ul",
    "ny",
    "ves",
    "cor",
    "dra",
    "hel",
    "sto",
]
COMMON = (
    "the and of a to in was he she they it with for on at by from his her their but not as this that "
    "had were there then when into over again under old new great small dark light long"
).split()
WINDOW_TURNS = 20
SCAN_DEPTH = 2 * WINDOW_TURNS + 1


def word(rng: random.Random) -> str:
    """A name-like key word (3-4 syllables, so it is not a substring of ordinary words)."""
    return "".join(rng.choice(SYLLABLES) for _ in range(rng.randint(3, 4)))


def filler(rng: random.Random) -> str:
    return rng.choice(COMMON)


def build_book(entries: int, keys_per_entry: int, rng: random.Random) -> tuple[list[LoreSpec], list[str]]:
    used: set[str] = set()
    all_keys: list[str] = []
    specs = []
    for i in range(entries):
        keys = []
        while len(keys) < keys_per_entry:
            key = " ".join(word(rng) for _ in range(rng.choice((1, 1, 1, 2, 2, 3))))
            if key not in used:
                used.add(key)
                keys.append(key)
        all_keys.extend(keys)
        fields = {}
        roll = rng.random()
        if roll < 0.20:
            fields["secondary_keys"] = (rng.choice(all_keys), rng.choice(COMMON))
        if rng.random() < 0.002:
            fields["constant"] = True
        if rng.random() < 0.01:
            keys[-1] = f"/{word(rng)}(s|es)?\\b/i"
        if rng.random() < 0.05:
            fields["inclusion_group"] = f"group-{rng.randrange(50)}"
        if rng.random() < 0.05:
            fields["probability"] = rng.choice((10, 50, 90))
        # ~40 words, one or two of them another entry's key (so recursion has something to follow)
        text = " ".join(rng.choice(all_keys) if rng.random() < 0.01 else filler(rng) for _ in range(40))
        specs.append(
            LoreSpec(
                entry_id=f"e{i:05d}",
                title=f"Entry {i}",
                text=text,
                keys=tuple(keys),
                insertion_order=rng.randrange(0, 200),
                token_count=60,
                **fields,
            )
        )
    return specs, all_keys


def build_chat(turns: int, all_keys: list[str], rng: random.Random) -> list[tuple[int, str, str]]:
    def sentence(words: int) -> str:
        out = []
        for _ in range(words):
            out.append(rng.choice(all_keys) if rng.random() < 0.01 else filler(rng))
        return " ".join(out).capitalize() + "."

    return [(t, sentence(15), " ".join(sentence(16) for _ in range(5))) for t in range(1, turns + 1)]


class PerEntryRegexLoop:
    """The baseline: every entry's keys as its own precompiled regex, searched entry by entry.

    Made as fast as such a loop gets: the buffer is lowercased once and the per-entry
    patterns are case-sensitive alternations of the lowercased keys (so `re` can use its
    literal-prefix search); regex keys keep their own flags.
    """

    def __init__(self, specs: list[LoreSpec]):
        self.entries = []
        for spec in specs:
            plain = [re.escape(k.lower()) for k in spec.keys if not k.startswith("/")]
            regexes = [re.compile(k[1:-2], re.IGNORECASE) for k in spec.keys if k.startswith("/")]
            primary = re.compile("|".join(plain)) if plain else None
            secondary = (
                re.compile("|".join(re.escape(k.lower()) for k in spec.secondary_keys)) if spec.secondary_keys else None
            )
            self.entries.append((spec.entry_id, primary, regexes, secondary))

    def run(self, buffer: str) -> set[str]:
        lowered = buffer.lower()
        matched = set()
        for entry_id, primary, regexes, secondary in self.entries:
            if (primary is not None and primary.search(lowered)) or any(r.search(buffer) for r in regexes):
                matched.add(entry_id)
                if secondary is not None:
                    secondary.search(lowered)
        return matched


class PerKeySubstringLoop:
    """SillyTavern's own loop (world-info.js matchKeys): `haystack.includes(key)` key by key."""

    def __init__(self, specs: list[LoreSpec]):
        self.entries = [
            (
                s.entry_id,
                [k.lower() for k in s.keys if not k.startswith("/")],
                [re.compile(k[1:-2], re.IGNORECASE) for k in s.keys if k.startswith("/")],
            )
            for s in specs
        ]

    def run(self, buffer: str) -> set[str]:
        lowered = buffer.lower()
        return {
            entry_id
            for entry_id, keys, regexes in self.entries
            if any(k in lowered for k in keys) or any(r.search(buffer) for r in regexes)
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--entries", type=int, default=5000)
    parser.add_argument("--keys", type=int, default=10)
    parser.add_argument("--turns", type=int, default=60)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    specs, all_keys = build_book(args.entries, args.keys, rng)
    chat = build_chat(args.turns, all_keys, rng)
    print(
        f"book: {len(specs):,} entries, {len(all_keys):,} keys; chat: {len(chat)} turns; "
        f"window {WINDOW_TURNS} turns = scan depth {SCAN_DEPTH} messages"
    )
    print("load:", os.popen("uptime").read().strip())

    defaults = LoreDefaults(scan_depth=SCAN_DEPTH, recursion_depth=3)
    started = time.perf_counter()
    book = CompiledBook(specs, defaults)
    print(
        f"compile the book (automaton over {len(book.needles):,} keys, regexes, indexes): "
        f"{(time.perf_counter() - started) * 1000:.0f} ms (once per book version)"
    )
    first_pass_book = CompiledBook(specs, LoreDefaults(scan_depth=SCAN_DEPTH, recursion_depth=0))
    started = time.perf_counter()
    baseline = PerEntryRegexLoop(specs)
    print(f"compile the baseline's {len(specs):,} per-entry regexes: {(time.perf_counter() - started) * 1000:.0f} ms")

    substring_loop = PerKeySubstringLoop(specs)
    measured_turns = [t for t in range(WINDOW_TURNS + 1, len(chat) + 1)]
    cold, warm, loop, substring = [], [], [], []
    cold_cpu, loop_cpu = [], []
    activated_counts, checks = [], 0
    for _ in range(args.repeat):
        state = None
        for turn in measured_turns:
            history = [t for t in chat if turn - WINDOW_TURNS <= t[0] < turn]
            pending = chat[turn - 1][1]
            messages = scan_messages(pending_input=pending, turns=history)
            seed = activation_seed(save_id="bench", generation=0, turn=turn)

            book._message_cache.clear()  # the turn's messages are all new to the matcher
            started, cpu = time.perf_counter(), time.process_time()
            result = activate(book=book, messages=messages, turn=turn, state=state, seed=seed)
            cold.append(time.perf_counter() - started)
            cold_cpu.append(time.process_time() - cpu)

            started = time.perf_counter()
            again = activate(book=book, messages=messages, turn=turn, state=state, seed=seed)
            warm.append(time.perf_counter() - started)
            assert again.activated_ids == result.activated_ids
            state = result.state
            activated_counts.append(len(result.activated))

            buffer = "\x01" + "\n\x01".join(m.text.strip() for m in messages[:SCAN_DEPTH])
            started, cpu = time.perf_counter(), time.process_time()
            matched = baseline.run(buffer)
            loop.append(time.perf_counter() - started)
            loop_cpu.append(time.process_time() - cpu)
            started = time.perf_counter()
            assert substring_loop.run(buffer) == matched
            substring.append(time.perf_counter() - started)

            first = activate(book=first_pass_book, messages=messages, turn=turn, state=None, seed=seed)
            key_matched = {
                r.entry_id
                for r in first.explanations.values()
                if r.matched_key and r.code in ("key", "secondary", "group", "probability", "budget")
            }
            constants = {s.entry_id for s in specs if s.constant}
            assert key_matched == matched - constants or key_matched == matched, (
                len(key_matched ^ matched),
                sorted(key_matched ^ matched)[:5],
            )
            checks += 1

    def line(name: str, samples: list[float]) -> str:
        ordered = sorted(samples)
        p50 = statistics.median(ordered) * 1000
        p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))] * 1000
        return f"{name:<44} p50 {p50:8.2f} ms   p95 {p95:8.2f} ms"

    print(line("engine, cold (every message scanned)", cold))
    print(line("engine, cold, CPU time", cold_cpu))
    print(line("engine, warm (consecutive turns)", warm))
    print(line("per-entry regex loop (matching only)", loop))
    print(line("per-entry regex loop, CPU time", loop_cpu))
    print(line("per-key substring loop (SillyTavern's way)", substring))
    print(
        f"ratio per-entry regex loop / engine cold (p50, wall): {statistics.median(loop) / statistics.median(cold):.1f}x; "
        f"CPU: {statistics.median(loop_cpu) / statistics.median(cold_cpu):.1f}x; "
        f"loop / engine warm: {statistics.median(loop) / statistics.median(warm):.1f}x"
    )
    print(
        f"ratio per-key substring loop / engine cold (p50): {statistics.median(substring) / statistics.median(cold):.1f}x"
    )
    print(
        f"activated per turn: median {statistics.median(activated_counts):.0f}; "
        f"first-pass key matches equal the loop's matches on {checks} of {checks} turns"
    )


if __name__ == "__main__":
    main()

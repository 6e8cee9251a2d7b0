"""Benchmark: the Lore Book list page on a 5,000-entry book (server time and query count).

A universe with `--entries` lore entries (default 5,000; texts of 20-220 words drawn from a
fixed vocabulary, 0-4 links each, word and token counts stored as the lore services store
them). Each page variant is requested through Django's test client by a logged-in author
(the whole request: middleware, view, selectors, template rendering; no network), `--repeat`
times after one warm-up, and p50/p95 plus the number of SQL queries are printed. The same
page on a 50-entry book gives the query count that must not grow with the book (no N+1).

Beside the page, the raw floor measured in the same run: the page's own SQL done directly
(`count()` + `list()` of the 50 rows with their links and backlinks, and the book totals
aggregate), so the ratio shows what the view and the template add on top of the database.

With the same book, Universe-as-Code: export, parse + validate, import as a new universe and
re-import unchanged, beside raw `tomli_w.dumps` / `tomllib.loads` of the same document.

Usage (from the project root):
    .venv/bin/python bench/lore_list.py [--entries 5000] [--repeat 30]
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/axiom_bench_lore .venv/bin/python bench/lore_list.py
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
TMP = Path(tempfile.mkdtemp(prefix="axiom-bench-lore-"))
os.environ.setdefault("SECRET_KEY", "bench-not-secret")
os.environ["DEBUG"] = "0"  # production-like: no query log kept between requests
os.environ.setdefault("ALLOWED_HOSTS", "testserver,localhost,127.0.0.1")
for name in ("SECURE_SSL_REDIRECT", "SESSION_COOKIE_SECURE", "CSRF_COOKIE_SECURE"):
    os.environ[name] = "0"
os.environ["AXIOM_VAR_DIR"] = str(TMP / "var")
os.environ.setdefault("DATABASE_URL", f"sqlite:///{TMP / 'bench.sqlite3'}")
os.environ["CHROMA_PATH"] = str(TMP / "chroma")
os.environ.pop("CHROMA_HOST", None)
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")
os.environ.setdefault("LOG_LEVEL", "WARNING")
os.environ["DJANGO_SETTINGS_MODULE"] = "studio.settings"

import django  # noqa: E402

django.setup()

from django.contrib.auth.models import Group, User  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.db import connection  # noqa: E402
from django.test import Client  # noqa: E402
from django.test.utils import CaptureQueriesContext  # noqa: E402

from studio.roles import AUTHORS  # noqa: E402
from studio.memory.embeddings.counting import text_counts, token_method  # noqa: E402
from studio.world.models import EmbeddingState, LoreEntry, LoreKind, Universe  # noqa: E402
from studio.universes.selectors import lore_book_totals, lore_entry_search, lore_rows  # noqa: E402

VOCABULARY = (
    "salt harbour smuggler guild ship tide lantern debt oath river market spice captain "
    "storm reef chart merchant guard tavern coin ledger rope anchor fog bell tower king "
    "queen rebel war peace treaty secret map island cave temple priest blade shadow ember"
).split()


def build_book(slug: str, entries: int, rng: random.Random) -> Universe:
    owner = User.objects.get(username="bench-author")
    universe = Universe.objects.create(name=f"Bench {entries}", slug=slug, owner=owner)
    kinds = LoreKind.values
    rows = []
    for i in range(entries):
        text = " ".join(rng.choice(VOCABULARY) for _ in range(rng.randint(20, 220))).capitalize() + "."
        words, tokens = text_counts(text)
        rows.append(
            LoreEntry(
                universe=universe,
                entry_id=f"entry-{i:05d}",
                title=f"{rng.choice(VOCABULARY).title()} {i:05d}",
                kind=kinds[i % len(kinds)],
                text=text,
                keys=[rng.choice(VOCABULARY)],
                word_count=words,
                token_count=tokens,
                embedding_state=EmbeddingState.EMBEDDED,
            )
        )
    created = LoreEntry.objects.bulk_create(rows, batch_size=500)
    through = LoreEntry.links.through
    links = set()
    for entry in created:
        for target in rng.sample(created, rng.randint(0, 4)):
            if target.pk != entry.pk:
                links.add((entry.pk, target.pk))
    through.objects.bulk_create([through(from_loreentry_id=a, to_loreentry_id=b) for a, b in links], batch_size=1000)
    return universe


def timed_get(
    client: Client, url: str, params: dict, headers: dict, repeat: int
) -> tuple[list[float], list[float], int, int]:
    """Return wall-clock and CPU seconds per request, the query count and the response size.

    CPU time (this process: Python, template, and SQLite's own work, which runs in-process)
    is what a request costs when the machine is not shared; wall time adds waiting for the
    CPU (and, on PostgreSQL, the database server's work).
    """
    client.get(url, params, **headers)  # warm-up (template compile, caches)
    samples, cpu = [], []
    for _ in range(repeat):
        start, start_cpu = time.perf_counter(), time.process_time()
        response = client.get(url, params, **headers)
        samples.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
        assert response.status_code in (200, 286), (url, response.status_code)
    with CaptureQueriesContext(connection) as ctx:
        client.get(url, params, **headers)
    return samples, cpu, len(ctx.captured_queries), len(response.content)


def raw_floor(universe: Universe, repeat: int) -> list[float]:
    """The page's own database work done directly: count, 50 rows + links both ways, totals."""
    samples = []
    for _ in range(repeat + 1):
        start = time.perf_counter()
        qs = lore_rows(lore_entry_search(universe=universe))
        qs.count()
        rows = list(qs[:50])
        for row in rows:
            list(row.links.all()), list(row.backlinks.all())
        lore_book_totals(universe=universe)
        samples.append(time.perf_counter() - start)
    return samples[1:]


def ms(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))] * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, default=5000)
    parser.add_argument("--repeat", type=int, default=30)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument(
        "--no-toml", dest="toml", action="store_false", help="skip the Universe-as-Code export/import measurement"
    )
    args = parser.parse_args()

    call_command("migrate", verbosity=0)
    author = User.objects.create_user("bench-author", password="x")
    author.groups.add(Group.objects.get(name=AUTHORS))
    rng = random.Random(args.seed)
    start = time.perf_counter()
    big = build_book("bench-big", args.entries, rng)
    build_seconds = time.perf_counter() - start
    small = build_book("bench-small", 50, rng)
    client = Client()
    client.force_login(author)
    htmx = {"HTTP_HX_REQUEST": "true"}
    engine = connection.vendor
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(
        f"# Lore Book list: {args.entries:,} entries on {engine} ({build_seconds:.1f}s to build, "
        f"token counts: {token_method()}); {args.repeat} requests each after a warm-up; "
        f"load average {load:.1f} on {os.cpu_count()} CPUs"
    )
    variants = [
        ("page 1 (full page)", {}, {}),
        ("page 1 (htmx fragment)", {}, htmx),
        ("last page", {"page": str(-(-args.entries // 50))}, {}),
        ("text search 'smuggler'", {"q": "smuggler"}, {}),
        ("kind filter + sort by tokens", {"kind": "character", "sort": "-token_count"}, {}),
        ("embedding status poll", None, htmx),
    ]
    print()
    print("| request | p50 ms | p95 ms | CPU p50 ms | queries (5,000) | queries (50) | bytes |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    results = {}
    for label, params, headers in variants:
        if params is None:
            ids = list(big.lore_entries.values_list("pk", flat=True)[:50])
            small_ids = list(small.lore_entries.values_list("pk", flat=True)[:50])
            url, small_url = f"/universes/{big.slug}/lore/status/", f"/universes/{small.slug}/lore/status/"
            samples, cpu, queries, size = timed_get(client, url, {"ids": ids}, headers, args.repeat)
            _, _, small_queries, _ = timed_get(client, small_url, {"ids": small_ids}, headers, 2)
        else:
            url, small_url = f"/universes/{big.slug}/lore/", f"/universes/{small.slug}/lore/"
            samples, cpu, queries, size = timed_get(client, url, params, headers, args.repeat)
            _, _, small_queries, _ = timed_get(client, small_url, params, headers, 2)
        results[label] = samples
        print(
            f"| {label} | {ms(samples, 50):.1f} | {ms(samples, 95):.1f} | {ms(cpu, 50):.1f} | {queries} "
            f"| {small_queries} | {size:,} |"
        )
    floor = raw_floor(big, args.repeat)
    page_p50 = ms(results["page 1 (full page)"], 50)
    print()
    print(
        f"Raw floor (the page's SQL done directly): p50 {ms(floor, 50):.1f} ms, p95 {ms(floor, 95):.1f} ms; "
        f"full page / raw floor = {page_p50 / ms(floor, 50):.2f}x"
    )
    print(f"Mean full page: {statistics.fmean(results['page 1 (full page)']) * 1000:.1f} ms (target: under 200 ms)")
    if args.toml:
        bench_toml(big, author)


def bench_toml(universe: Universe, author: User) -> None:
    """Universe-as-Code on the same book: export, parse, import as a new universe, re-import."""
    import tomllib

    import tomli_w

    from studio.universes import services
    from studio.universes.interchange.toml_io import export_universe, parse_document

    services._sync_lore_now = lambda universe_pk: None  # no embedding jobs in a benchmark
    timings = {}
    start = time.perf_counter()
    text = export_universe(universe)
    timings["export"] = time.perf_counter() - start
    copy_text = text.replace(f'slug = "{universe.slug}"', 'slug = "bench-copy"', 1)
    start = time.perf_counter()
    document = parse_document(copy_text.encode())
    timings["parse + validate"] = time.perf_counter() - start
    start = time.perf_counter()
    copy, counts = services.universe_import_document(user=author, document=document)
    timings["import as a new universe"] = time.perf_counter() - start
    start = time.perf_counter()
    _, again = services.universe_import_document(user=author, document=document, universe=copy)
    timings["re-import, nothing changed"] = time.perf_counter() - start
    identical = export_universe(copy) == copy_text
    start = time.perf_counter()
    raw = tomllib.loads(copy_text)
    raw_load = time.perf_counter() - start
    start = time.perf_counter()
    tomli_w.dumps(raw, multiline_strings=True)
    raw_dump = time.perf_counter() - start
    print()
    print(
        f"Universe-as-Code, {counts['created']:,} entries, {len(text.encode()):,} bytes "
        f"(export -> import -> export byte-identical: {identical}; re-import: {again})"
    )
    print()
    print("| step | seconds | raw library floor |")
    print("|---|---:|---:|")
    print(
        f"| export | {timings['export']:.2f} | tomli_w.dumps {raw_dump:.2f} s ({timings['export'] / raw_dump:.1f}x) |"
    )
    print(
        f"| parse + validate | {timings['parse + validate']:.2f} | tomllib.loads {raw_load:.2f} s "
        f"({timings['parse + validate'] / raw_load:.1f}x) |"
    )
    print(f"| import as a new universe | {timings['import as a new universe']:.2f} | |")
    print(f"| re-import, nothing changed | {timings['re-import, nothing changed']:.2f} | |")


if __name__ == "__main__":
    main()

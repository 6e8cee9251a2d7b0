"""Rehearse the move of the world's rows (issue 34) on a copy of a database: load, count, migrate.

Runs against the checkout in the current directory (its `studio/` and `bench/`), so the same
script serves both sides of the upgrade: `load` with a checkout of the release before the move
(the rows are written through its models), `counts` and `migrate` with either. Counts are plain
SQL on the tables, which the move does not rename. DATABASE_URL picks the database, as for
`manage.py`. The procedure and the figures: docs/upgrading.md.

    # in a checkout of the release before the move, on the database to copy:
    .venv/bin/python manage.py migrate && .venv/bin/python manage.py load_demo --no-embed
    .venv/bin/python ../wt/scripts/world_rehearsal.py load --turns 10000
    # copy it (createdb -T, or cp for SQLite), then in this checkout, on the copy:
    .venv/bin/python scripts/world_rehearsal.py counts > before.json
    .venv/bin/python scripts/world_rehearsal.py migrate
    .venv/bin/python scripts/world_rehearsal.py counts > after.json
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from pathlib import Path

CODE = Path.cwd()
sys.path[:0] = [str(CODE), str(CODE / "bench")]

ROW_TABLES = [
    "universes_universe",
    "universes_universemeta",
    "universes_loreentry",
    "universes_loreentry_links",
    "universes_universe_members",
    "saves_save",
    "saves_event",
    "saves_statecache",
]
ENGINE_TABLES = [
    "memory_loreactivation",
    "memory_presence",
    "memory_job",
    "memory_chapter",
    "memory_fact",
    "universes_lorerevision",
    "saves_narratorsnapshot",
]
MOVED_MODELS = ["universe", "universemeta", "loreentry", "save", "event", "statecache"]


class _RowsOnly:
    """The vector store `bench/turn_path.bulk_load` writes to, minus the vectors: the rehearsal is about rows."""

    class store:  # noqa: N801 (turn_path calls vectors.store.upsert)
        @staticmethod
        def upsert(*args, **kwargs) -> None:
            return None

    def note_external_write(self, save_id) -> None:
        return None

    def sync_lore(self, save_id, lore) -> None:
        return None


def setup() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "studio.settings")
    os.environ.setdefault("DEBUG", "1")
    import django

    django.setup()


def load(turns: int) -> None:
    """A save of `turns` turns on the demo universe, bulk-loaded by bench/turn_path.py (rows only: the
    chunks it prepares with the tests' hashing embedder go nowhere), and a
    permission and an admin log entry on each moved model's content type, for the relabel to carry."""
    setup()
    from django.apps import apps
    from django.contrib.admin.models import CHANGE, LogEntry
    from django.contrib.auth.models import Permission, User
    from django.contrib.contenttypes.models import ContentType
    from turn_path import bulk_load

    from tests.fakes import HashingEmbedder

    def model(name: str):  # the moved models by name, in whichever app this checkout has them
        return next(
            m
            for m in apps.get_models()
            if m._meta.model_name == name and m._meta.app_label in ("universes", "saves", "world")
        )

    Universe = model("universe")
    universe = Universe.objects.get(slug="the-drowned-reach")
    started = time.perf_counter()
    game_save = bulk_load(universe, turns, _RowsOnly(), random.Random(7), HashingEmbedder(dimension=384))
    print(
        f"{turns:,} turns loaded into save {game_save.save_id} in {time.perf_counter() - started:.1f} s",
        file=sys.stderr,
    )
    user, _ = User.objects.get_or_create(username="rehearsal-editor")
    for name in MOVED_MODELS:
        model_class = model(name)
        content_type = ContentType.objects.get_for_model(model_class)
        user.user_permissions.add(Permission.objects.get(content_type=content_type, codename=f"change_{name}"))
        row = model_class.objects.order_by("pk").first()
        LogEntry.objects.create(
            user=user,
            content_type=content_type,
            object_id=str(row.pk),
            object_repr=str(row)[:200],
            action_flag=CHANGE,
            change_message="[]",
        )


def counts() -> dict:
    setup()
    from django.db import connection

    out: dict = {"vendor": connection.vendor, "rows": {}, "engine_rows": {}}
    with connection.cursor() as cursor:
        existing = set(connection.introspection.table_names(cursor))
        for key, tables in (("rows", ROW_TABLES), ("engine_rows", ENGINE_TABLES)):
            for table in tables:
                if table in existing:
                    cursor.execute(f"SELECT COUNT(*) FROM {connection.ops.quote_name(table)}")
                    out[key][table] = cursor.fetchone()[0]
        labels = "('saves', 'universes', 'world')"
        cursor.execute(
            f"SELECT app_label, model, id FROM django_content_type WHERE app_label IN {labels} "
            "ORDER BY app_label, model"
        )
        out["content_types"] = {f"{app}.{model}": pk for app, model, pk in cursor.fetchall()}
        cursor.execute(
            "SELECT ct.app_label, COUNT(*) FROM auth_permission p JOIN django_content_type ct "
            f"ON ct.id = p.content_type_id WHERE ct.app_label IN {labels} GROUP BY ct.app_label "
            "ORDER BY ct.app_label"
        )
        out["permissions"] = dict(cursor.fetchall())
        cursor.execute(
            "SELECT ct.app_label || '.' || p.codename FROM auth_user_user_permissions up "
            "JOIN auth_permission p ON p.id = up.permission_id "
            "JOIN django_content_type ct ON ct.id = p.content_type_id "
            f"WHERE ct.app_label IN {labels} ORDER BY 1"
        )
        out["granted"] = [row[0] for row in cursor.fetchall()]
        cursor.execute(
            "SELECT ct.app_label, COUNT(*) FROM django_admin_log l JOIN django_content_type ct "
            f"ON ct.id = l.content_type_id WHERE ct.app_label IN {labels} GROUP BY ct.app_label "
            "ORDER BY ct.app_label"
        )
        out["admin_log"] = dict(cursor.fetchall())
        cursor.execute(
            "SELECT app, name FROM django_migrations WHERE app IN ('world', 'saves', 'universes', "
            "'memory', 'proxy') ORDER BY app, name"
        )
        out["last_migrations"] = {app: name for app, name in cursor.fetchall()}
    return out


def migrate() -> None:
    setup()
    from django.core.management import call_command

    started = time.perf_counter()
    call_command("migrate", verbosity=1)
    print(f"migrate took {time.perf_counter() - started:.1f} s", file=sys.stderr)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("load").add_argument("--turns", type=int, default=10_000)
    sub.add_parser("counts")
    sub.add_parser("migrate")
    args = parser.parse_args()
    if args.command == "load":
        load(args.turns)
    elif args.command == "counts":
        print(json.dumps(counts(), indent=2))
    else:
        migrate()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

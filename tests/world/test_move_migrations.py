"""The move of the world's rows (issue 34) is a state-only migration that keeps every row.

A database at the state before the move (saves 0007, universes 0008, memory 0012, proxy 0002)
holding a universe with meta and linked lore, a save with turns, states and an engine row, a
permission granted on the old content type and an admin log entry: migrating forward keeps
every row and id, gives the content types (same ids) the `world` label, so the grant and the
log entry follow, and the ORM reads it all through `studio.world.models`. Back again, the labels
return. Run on SQLite and on PostgreSQL (`DATABASE_URL`).
"""

from __future__ import annotations

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from studio.world.models import Event, LoreEntry, Save, StateCache, Universe, UniverseMeta

pytestmark = pytest.mark.django_db(transaction=True)

MOVE = [
    ("world", "0001_initial"),
    ("memory", "0013_world_rows"),
    ("proxy", "0003_world_rows"),
    ("saves", "0008_world_rows"),
    ("universes", "0009_world_rows"),
]
MOVED = {"saves": ["save", "event", "statecache"], "universes": ["universe", "universemeta", "loreentry"]}
TABLES = [
    "universes_universe",
    "universes_universemeta",
    "universes_loreentry",
    "universes_loreentry_links",
    "universes_universe_members",
    "saves_save",
    "saves_event",
    "saves_statecache",
]


def executor() -> MigrationExecutor:
    ex = MigrationExecutor(connection)
    ex.loader.build_graph()
    return ex


def pre_move_nodes(ex: MigrationExecutor) -> list[tuple[str, str]]:
    """The migration each moving app stood at before the move (the parent of its move migration),
    and every other app's last one."""
    nodes = []
    for app, name in MOVE[1:]:
        parents = [p for p in ex.loader.graph.node_map[(app, name)].parents if p.key[0] == app]
        nodes.append(parents[0].key)
    moving = {app for app, _ in MOVE}
    return nodes + [leaf for leaf in ex.loader.graph.leaf_nodes() if leaf[0] not in moving]


def table_counts() -> dict[str, int]:
    with connection.cursor() as cursor:
        out = {}
        for table in TABLES:
            cursor.execute(f"SELECT COUNT(*) FROM {connection.ops.quote_name(table)}")
            out[table] = cursor.fetchone()[0]
        return out


def content_types() -> dict[tuple[str, str], int]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT app_label, model, id FROM django_content_type")
        return {(app, model): pk for app, model, pk in cursor.fetchall()}


def load_pre_move_rows(apps) -> dict:
    """Rows written with the historical models of the pre-move state (saves.Save, universes.Universe, ...)."""
    User = apps.get_model("auth", "User")
    Permission = apps.get_model("auth", "Permission")
    ContentType = apps.get_model("contenttypes", "ContentType")
    LogEntry = apps.get_model("admin", "LogEntry")
    OldUniverse = apps.get_model("universes", "Universe")
    OldLoreEntry = apps.get_model("universes", "LoreEntry")
    OldSave = apps.get_model("saves", "Save")
    Fact = apps.get_model("memory", "Fact")

    author = User.objects.create(username="author", password="!")
    universe = OldUniverse.objects.create(name="Pre-move", slug="pre-move", owner=author)
    universe.members.add(author)
    apps.get_model("universes", "UniverseMeta").objects.create(universe=universe, key="tone", value="grim")
    keep = OldLoreEntry.objects.create(universe=universe, entry_id="keep", title="The Keep", kind="place")
    kael = OldLoreEntry.objects.create(universe=universe, entry_id="kael", title="Kaël", kind="character")
    kael.links.add(keep)
    save = OldSave.objects.create(universe=universe, name="Before", save_id="premove0000001", current_turn=3)
    fork = OldSave.objects.create(
        universe=universe, name="Fork", save_id="premove0000002", forked_from=save, fork_turn=2
    )
    for turn in (1, 2, 3):
        apps.get_model("saves", "Event").objects.create(game_save=save, turn_id=turn, narrative=f"turn {turn}")
        apps.get_model("saves", "StateCache").objects.create(game_save=save, turn_id=turn, state={"turn": turn})
    Fact.objects.create(game_save=save, turn_id=2, statement="Kaël holds the keep.")
    # A grant and a log entry on the old content types: they must follow the relabel.
    save_type, _ = ContentType.objects.get_or_create(app_label="saves", model="save")
    for app_label, models in MOVED.items():
        for model in models:
            ContentType.objects.get_or_create(app_label=app_label, model=model)
    change_save, _ = Permission.objects.get_or_create(
        content_type=save_type, codename="change_save", defaults={"name": "Can change save"}
    )
    author.user_permissions.add(change_save)
    LogEntry.objects.create(
        user=author,
        content_type=save_type,
        object_id=str(save.pk),
        object_repr="Before",
        action_flag=2,
        change_message="[]",
    )
    return {
        "author": author.pk,
        "save": save.pk,
        "fork": fork.pk,
        "kael": kael.pk,
        "keep": keep.pk,
        "universe": universe.pk,
        "save_type": save_type.pk,
        "permission": change_save.pk,
    }


def test_the_move_keeps_every_row_and_relabels_the_content_types():
    ex = executor()
    ex.migrate([("world", None)])  # back to the state before the move (state only: no table changes)
    # A test database starts with the world's content types: back before the move they are the old apps'.
    assert not [key for key in content_types() if key[0] == "world"]
    ex = executor()
    ids = load_pre_move_rows(ex.loader.project_state(pre_move_nodes(ex)).apps)
    before_types = content_types()
    before_counts = table_counts()
    assert before_counts == {
        "universes_universe": 1,
        "universes_universemeta": 1,
        "universes_loreentry": 2,
        "universes_loreentry_links": 1,
        "universes_universe_members": 1,
        "saves_save": 2,
        "saves_event": 3,
        "saves_statecache": 3,
    }

    ex.migrate(ex.loader.graph.leaf_nodes())

    assert table_counts() == before_counts
    after_types = content_types()
    for app_label, models in MOVED.items():
        for model in models:
            assert (app_label, model) not in after_types
            assert after_types[("world", model)] == before_types[(app_label, model)]  # the same row, relabelled
    save = Save.objects.get(pk=ids["save"])
    assert [e.narrative for e in Event.objects.filter(game_save=save)] == ["turn 1", "turn 2", "turn 3"]
    assert StateCache.objects.get(game_save=save, turn_id=3).state == {"turn": 3}
    assert Save.objects.get(pk=ids["fork"]).forked_from == save
    assert list(LoreEntry.objects.get(pk=ids["kael"]).links.values_list("pk", flat=True)) == [ids["keep"]]
    universe = Universe.objects.get(pk=ids["universe"])
    assert universe.meta_values() == {"tone": "grim"} and UniverseMeta.objects.count() == 1
    assert list(universe.members.values_list("pk", flat=True)) == [ids["author"]]
    assert save.facts.get().statement == "Kaël holds the keep."  # an engine row's key still resolves

    from django.contrib.admin.models import LogEntry
    from django.contrib.auth.models import User

    author = User.objects.get(pk=ids["author"])
    assert author.has_perm("world.change_save") and not author.has_perm("saves.change_save")
    entry = LogEntry.objects.get(object_id=str(ids["save"]))
    assert entry.content_type.app_label == "world" and entry.get_edited_object() == save

    # And back: the labels return (the tables never moved).
    executor().migrate([("world", None)])
    back = content_types()
    assert back[("saves", "save")] == before_types[("saves", "save")] and ("world", "save") not in back
    executor().migrate(executor().loader.graph.leaf_nodes())
    assert content_types()[("world", "save")] == before_types[("saves", "save")]


def test_a_migrate_stopped_after_the_world_app_s_first_migration_still_relabels():
    """`migrate world 0001` alone runs post_migrate, which makes `world.*` content types (and their
    permissions) beside the old ones: going on, the old rows (with the grants) win, under the new label."""
    from django.contrib.auth.models import Permission
    from django.contrib.contenttypes.models import ContentType

    ex = executor()
    ex.migrate([("world", None)])
    ids = load_pre_move_rows(executor().loader.project_state(pre_move_nodes(ex)).apps)
    ex = executor()
    ex.migrate([("world", "0001_initial")])
    early = ContentType.objects.create(app_label="world", model="save")
    Permission.objects.create(content_type=early, codename="change_save", name="Can change save")
    ContentType.objects.clear_cache()

    ex = executor()
    ex.migrate(ex.loader.graph.leaf_nodes())

    types = content_types()
    assert types[("world", "save")] == ids["save_type"] and ("saves", "save") not in types
    assert list(Permission.objects.filter(codename="change_save").values_list("pk", flat=True)) == [ids["permission"]]


def test_the_move_migrations_change_no_table():
    """`sqlmigrate` of each move migration: no statement but the transaction around it."""
    from io import StringIO

    from django.core.management import call_command

    for app, name in MOVE:
        out = StringIO()
        call_command("sqlmigrate", app, name, stdout=out)
        statements = [line for line in out.getvalue().splitlines() if line.strip() and not line.startswith("--")]
        assert set(statements) <= {"BEGIN;", "COMMIT;"}, (app, name, statements)


def test_the_world_tables_keep_their_names():
    assert {m._meta.db_table for m in (Universe, UniverseMeta, LoreEntry, Save, Event, StateCache)} == {
        "universes_universe",
        "universes_universemeta",
        "universes_loreentry",
        "saves_save",
        "saves_event",
        "saves_statecache",
    }
    assert LoreEntry.links.through._meta.db_table == "universes_loreentry_links"
    assert Universe.members.through._meta.db_table == "universes_universe_members"


def test_the_apps_they_left_do_not_re_export_them():
    """One import path per row: `studio.world.models` (a stale `saves.models` import fails loudly)."""
    import studio.saves.models
    import studio.universes.models

    for module, names in (
        (studio.saves.models, ["Save", "Event", "StateCache", "MemoryMode", "new_save_id"]),
        (studio.universes.models, ["Universe", "UniverseMeta", "LoreEntry", "EmbeddingState", "LoreKind"]),
    ):
        assert not [name for name in names if hasattr(module, name)], module.__name__

"""The world app's rows, moved from the universes and saves apps with their tables (issue 34).

State only: the tables were made by `universes` and `saves` migrations (0001..0008 and 0001..0007)
and keep their names (`Meta.db_table`), so this migration creates nothing in the database; the
apps' `world_rows` migrations then point every foreign key here and drop the old state.
"""

import django.db.models.deletion
import django.db.models.functions.text
import studio.world.models
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):
    initial = True

    dependencies = [
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
        ("universes", "0008_memory_tests"),
        ("saves", "0007_event_narrative_md5_index"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name="Universe",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                            ),
                        ),
                        ("name", models.CharField(max_length=200)),
                        ("slug", models.SlugField(max_length=80, unique=True)),
                        ("description", models.TextField(blank=True)),
                        ("created_at", models.DateTimeField(auto_now_add=True)),
                        ("updated_at", models.DateTimeField(auto_now=True)),
                        (
                            "members",
                            models.ManyToManyField(
                                blank=True,
                                db_table="universes_universe_members",
                                related_name="member_universes",
                                to=settings.AUTH_USER_MODEL,
                            ),
                        ),
                        (
                            "owner",
                            models.ForeignKey(
                                blank=True,
                                null=True,
                                on_delete=django.db.models.deletion.SET_NULL,
                                related_name="owned_universes",
                                to=settings.AUTH_USER_MODEL,
                            ),
                        ),
                    ],
                    options={
                        "db_table": "universes_universe",
                        "ordering": ["name"],
                    },
                ),
                migrations.CreateModel(
                    name="Save",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                            ),
                        ),
                        (
                            "save_id",
                            models.CharField(default=studio.world.models.new_save_id, max_length=64, unique=True),
                        ),
                        ("name", models.CharField(max_length=200)),
                        (
                            "memory_mode",
                            models.CharField(
                                choices=[
                                    ("classic", "Classic (hybrid search only)"),
                                    ("living", "Living (facts, beliefs, mental models)"),
                                ],
                                default="classic",
                                max_length=10,
                            ),
                        ),
                        ("beliefs_enabled", models.BooleanField(default=True)),
                        ("current_turn", models.PositiveIntegerField(default=0)),
                        (
                            "timeline_generation",
                            models.PositiveIntegerField(
                                default=0,
                                help_text="Incremented by every rewind; jobs from an older generation write nothing.",
                            ),
                        ),
                        (
                            "meta",
                            models.JSONField(blank=True, default=dict, help_text="Universe_Meta copied at creation."),
                        ),
                        ("fork_turn", models.PositiveIntegerField(blank=True, null=True)),
                        ("created_at", models.DateTimeField(auto_now_add=True)),
                        ("updated_at", models.DateTimeField(auto_now=True)),
                        ("last_activity_at", models.DateTimeField(auto_now_add=True)),
                        (
                            "forked_from",
                            models.ForeignKey(
                                blank=True,
                                null=True,
                                on_delete=django.db.models.deletion.SET_NULL,
                                related_name="forks",
                                to="world.save",
                            ),
                        ),
                        (
                            "universe",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.CASCADE, related_name="saves", to="world.universe"
                            ),
                        ),
                    ],
                    options={
                        "db_table": "saves_save",
                        "ordering": ["-last_activity_at", "-id"],
                    },
                ),
                migrations.CreateModel(
                    name="LoreEntry",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                            ),
                        ),
                        ("entry_id", models.SlugField(max_length=120)),
                        ("title", models.CharField(max_length=300)),
                        (
                            "kind",
                            models.CharField(
                                choices=[
                                    ("character", "Character"),
                                    ("place", "Place"),
                                    ("faction", "Faction"),
                                    ("item", "Item"),
                                    ("concept", "Concept"),
                                    ("event", "Event"),
                                ],
                                default="concept",
                                max_length=20,
                            ),
                        ),
                        ("text", models.TextField(blank=True)),
                        ("keys", models.JSONField(blank=True, default=list, help_text="Aliases and trigger keys.")),
                        ("known_by", models.JSONField(blank=True, default=None, null=True)),
                        (
                            "extensions",
                            models.JSONField(
                                blank=True,
                                default=dict,
                                help_text="Imported fields the studio does not use, kept for re-export.",
                            ),
                        ),
                        ("enabled", models.BooleanField(default=True)),
                        ("constant", models.BooleanField(default=False, help_text="Always active while enabled.")),
                        ("secondary_keys", models.JSONField(blank=True, default=list)),
                        ("selective", models.BooleanField(default=True, help_text="Apply the secondary keys.")),
                        (
                            "selective_logic",
                            models.PositiveSmallIntegerField(
                                choices=[
                                    (0, "AND ANY (one secondary key also appears)"),
                                    (1, "NOT ALL (at least one secondary key is missing)"),
                                    (2, "NOT ANY (no secondary key appears)"),
                                    (3, "AND ALL (every secondary key also appears)"),
                                ],
                                default=0,
                            ),
                        ),
                        (
                            "case_sensitive",
                            models.BooleanField(blank=True, help_text="Empty: the universe default.", null=True),
                        ),
                        (
                            "match_whole_words",
                            models.BooleanField(blank=True, help_text="Empty: the universe default.", null=True),
                        ),
                        (
                            "scan_depth",
                            models.PositiveSmallIntegerField(
                                blank=True, help_text="Messages scanned; empty: the universe default.", null=True
                            ),
                        ),
                        ("insertion_order", models.IntegerField(default=100)),
                        (
                            "priority",
                            models.IntegerField(
                                blank=True, help_text="Budget priority; empty: the insertion order.", null=True
                            ),
                        ),
                        (
                            "position",
                            models.PositiveSmallIntegerField(
                                choices=[
                                    (0, "Before the character / world definitions"),
                                    (1, "After the character / world definitions"),
                                    (2, "Top of the author's note"),
                                    (3, "Bottom of the author's note"),
                                    (4, "In the history, at a depth"),
                                    (5, "Before the example messages"),
                                    (6, "After the example messages"),
                                    (7, "Outlet (placed by name)"),
                                ],
                                default=0,
                            ),
                        ),
                        ("depth", models.PositiveSmallIntegerField(default=4)),
                        (
                            "role",
                            models.PositiveSmallIntegerField(
                                blank=True, choices=[(0, "System"), (1, "User"), (2, "Assistant")], null=True
                            ),
                        ),
                        ("probability", models.PositiveSmallIntegerField(default=100)),
                        ("use_probability", models.BooleanField(default=True)),
                        (
                            "inclusion_group",
                            models.CharField(blank=True, help_text="Comma-separated group names.", max_length=300),
                        ),
                        ("group_prioritize", models.BooleanField(default=False)),
                        ("group_weight", models.PositiveIntegerField(default=100)),
                        (
                            "group_scoring",
                            models.BooleanField(blank=True, help_text="Empty: the universe default.", null=True),
                        ),
                        ("sticky", models.PositiveIntegerField(default=0)),
                        ("cooldown", models.PositiveIntegerField(default=0)),
                        ("delay", models.PositiveIntegerField(default=0)),
                        ("exclude_recursion", models.BooleanField(default=False)),
                        ("prevent_recursion", models.BooleanField(default=False)),
                        (
                            "delay_until_recursion",
                            models.PositiveSmallIntegerField(default=0, help_text="0 = off; N = recursion level N."),
                        ),
                        ("ignore_budget", models.BooleanField(default=False)),
                        ("vectorized", models.BooleanField(default=True, help_text="Also found by meaning.")),
                        (
                            "forced",
                            models.CharField(
                                blank=True,
                                choices=[
                                    ("", "Keys decide"),
                                    ("activate", "Always activate (@@activate)"),
                                    ("dont_activate", "Never activate (@@dont_activate)"),
                                ],
                                default="",
                                max_length=16,
                            ),
                        ),
                        ("activate_only_after", models.PositiveIntegerField(default=0)),
                        ("activate_only_every", models.PositiveIntegerField(default=0)),
                        (
                            "after_first_match",
                            models.CharField(
                                blank=True,
                                choices=[
                                    ("", "No change"),
                                    ("keep", "Stay active for good (@@keep_activate_after_match)"),
                                    ("stop", "Never again (@@dont_activate_after_match)"),
                                ],
                                default="",
                                max_length=8,
                            ),
                        ),
                        (
                            "additional_keys",
                            models.JSONField(
                                blank=True, default=list, help_text="Groups of keys; one of each group must appear."
                            ),
                        ),
                        ("exclude_keys", models.JSONField(blank=True, default=list)),
                        ("ignore_on_max_context", models.BooleanField(default=False)),
                        (
                            "embedding_state",
                            models.CharField(
                                choices=[("pending", "Pending"), ("embedded", "Embedded"), ("failed", "Failed")],
                                default="pending",
                                max_length=10,
                            ),
                        ),
                        ("embedding_error", models.TextField(blank=True)),
                        (
                            "word_count",
                            models.PositiveIntegerField(
                                blank=True,
                                editable=False,
                                help_text="Words in the text; set by the lore services.",
                                null=True,
                            ),
                        ),
                        (
                            "token_count",
                            models.PositiveIntegerField(
                                blank=True,
                                editable=False,
                                help_text="Embedding-model tokens in the text; set by the lore services.",
                                null=True,
                            ),
                        ),
                        ("version", models.PositiveIntegerField(default=1, editable=False)),
                        ("created_at", models.DateTimeField(auto_now_add=True)),
                        ("updated_at", models.DateTimeField(auto_now=True)),
                        (
                            "links",
                            models.ManyToManyField(
                                blank=True,
                                db_table="universes_loreentry_links",
                                related_name="backlinks",
                                to="world.loreentry",
                            ),
                        ),
                        (
                            "universe",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="lore_entries",
                                to="world.universe",
                            ),
                        ),
                    ],
                    options={
                        "verbose_name_plural": "lore entries",
                        "db_table": "universes_loreentry",
                        "ordering": ["title"],
                    },
                ),
                migrations.CreateModel(
                    name="UniverseMeta",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                            ),
                        ),
                        ("key", models.CharField(max_length=200)),
                        ("value", models.TextField(blank=True)),
                        (
                            "universe",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.CASCADE, related_name="meta", to="world.universe"
                            ),
                        ),
                    ],
                    options={
                        "verbose_name": "universe meta",
                        "verbose_name_plural": "universe meta",
                        "db_table": "universes_universemeta",
                        "ordering": ["key"],
                    },
                ),
                migrations.CreateModel(
                    name="Event",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                            ),
                        ),
                        ("turn_id", models.PositiveIntegerField()),
                        ("player_input", models.TextField(blank=True)),
                        ("narrative", models.TextField(blank=True)),
                        ("created_at", models.DateTimeField(auto_now_add=True)),
                        (
                            "edited_at",
                            models.DateTimeField(
                                blank=True,
                                help_text="When the narrative was last edited by hand (before accepting, or afterwards); none: as narrated or written.",
                                null=True,
                            ),
                        ),
                        (
                            "game_save",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.CASCADE, related_name="events", to="world.save"
                            ),
                        ),
                    ],
                    options={
                        "db_table": "saves_event",
                        "ordering": ["game_save", "turn_id"],
                        "indexes": [
                            models.Index(
                                models.F("game_save"),
                                django.db.models.functions.text.MD5("narrative"),
                                name="event_narrative_md5",
                            )
                        ],
                        "constraints": [
                            models.UniqueConstraint(fields=("game_save", "turn_id"), name="event_unique_turn")
                        ],
                    },
                ),
                migrations.CreateModel(
                    name="StateCache",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                            ),
                        ),
                        ("turn_id", models.PositiveIntegerField()),
                        ("state", models.JSONField(blank=True, default=dict)),
                        (
                            "game_save",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.CASCADE, related_name="states", to="world.save"
                            ),
                        ),
                    ],
                    options={
                        "verbose_name": "state cache",
                        "verbose_name_plural": "state cache",
                        "db_table": "saves_statecache",
                        "ordering": ["game_save", "turn_id"],
                        "constraints": [
                            models.UniqueConstraint(fields=("game_save", "turn_id"), name="state_unique_turn")
                        ],
                    },
                ),
                migrations.AddIndex(
                    model_name="save",
                    index=models.Index(fields=["universe", "-last_activity_at"], name="saves_save_univers_f59a7e_idx"),
                ),
                migrations.AddIndex(
                    model_name="loreentry",
                    index=models.Index(fields=["universe", "kind"], name="universes_l_univers_8d1235_idx"),
                ),
                migrations.AddIndex(
                    model_name="loreentry",
                    index=models.Index(fields=["universe", "title"], name="universes_l_univers_cc2197_idx"),
                ),
                migrations.AddConstraint(
                    model_name="loreentry",
                    constraint=models.UniqueConstraint(fields=("universe", "entry_id"), name="lore_entry_unique_id"),
                ),
                migrations.AddConstraint(
                    model_name="loreentry",
                    constraint=models.CheckConstraint(
                        condition=models.Q(("probability__lte", 100)), name="lore_entry_probability_range"
                    ),
                ),
                migrations.AddConstraint(
                    model_name="loreentry",
                    constraint=models.CheckConstraint(
                        condition=models.Q(("selective_logic__lte", 3)), name="lore_entry_selective_logic_range"
                    ),
                ),
                migrations.AddConstraint(
                    model_name="loreentry",
                    constraint=models.CheckConstraint(
                        condition=models.Q(("position__lte", 7)), name="lore_entry_position_range"
                    ),
                ),
                migrations.AddConstraint(
                    model_name="loreentry",
                    constraint=models.CheckConstraint(
                        condition=models.Q(("scan_depth__isnull", True), ("scan_depth__lte", 1000), _connector="OR"),
                        name="lore_entry_scan_depth_range",
                    ),
                ),
                migrations.AddConstraint(
                    model_name="universemeta",
                    constraint=models.UniqueConstraint(fields=("universe", "key"), name="universe_meta_unique_key"),
                ),
            ],
            database_operations=[],
        ),
    ]

"""Moving content types between app labels, for the migrations that moved models to the world app.

`relabel_content_types(old_label, new_label, model_names)` is a RunPython operation whose
reverse moves them back. The content type rows are relabelled, not recreated, so each keeps its
id, and the permissions, grants and admin log entries pointing at it follow (docs/upgrading.md,
"Upgrading to the world app"). Migrations call this module, so it must keep working for them:
it reads models only through the migration's `apps`.
"""

from __future__ import annotations

from django.db import migrations


def _relabel(apps, schema_editor, old_label: str, new_label: str, model_names: tuple[str, ...]) -> None:
    """Move the content types (and with them permissions and admin log entries) to the new app label.

    A content type already made under the new label (a `migrate` stopped between the world app's
    first migration and this one runs post_migrate, which creates it) is deleted first: it is
    the newer, empty one; the old row carries the permissions and the log entries.
    """
    ContentType = apps.get_model("contenttypes", "ContentType")
    types = ContentType.objects.using(schema_editor.connection.alias)
    for name in model_names:
        old = types.filter(app_label=old_label, model=name).first()
        if old is None:
            continue
        types.filter(app_label=new_label, model=name).delete()
        old.app_label = new_label
        old.save(update_fields=["app_label"])
    from django.contrib.contenttypes.models import ContentType as LiveContentType

    LiveContentType.objects.clear_cache()


def relabel_content_types(old_label: str, new_label: str, model_names: tuple[str, ...]) -> migrations.RunPython:
    """The RunPython that moves `model_names`' content types from `old_label` to `new_label` (and back)."""

    def forwards(apps, schema_editor):
        _relabel(apps, schema_editor, old_label, new_label, model_names)

    def backwards(apps, schema_editor):
        _relabel(apps, schema_editor, new_label, old_label, model_names)

    return migrations.RunPython(forwards, backwards, elidable=False)

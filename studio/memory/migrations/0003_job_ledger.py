"""Hand the vector jobs of rewind and fork to the job ledger.

Before, the checkpoint manager created VECTOR_ROLLBACK and FORK_VECTORS jobs RUNNING and
ran them itself, without a runner's claim. A process that died between the commit and that
run left such a row RUNNING with no holder, which the ledger (judging holders by their
claim) would trust for ever: put those rows back in the queue, as never started.
"""

from django.db import migrations

VECTOR_KINDS = ("vector_rollback", "fork_vectors")


def requeue_unclaimed_vector_jobs(apps, schema_editor):
    Job = apps.get_model("memory", "Job")
    for job in Job.objects.filter(kind__in=VECTOR_KINDS, status="running"):
        if (job.payload or {}).get("worker"):
            continue
        job.status = "queued"
        job.progress = "queued (left running by an earlier version)"
        job.save(update_fields=["status", "progress"])


class Migration(migrations.Migration):
    dependencies = [
        ("memory", "0002_observation_tombstone"),
    ]

    operations = [
        migrations.RunPython(requeue_unclaimed_vector_jobs, migrations.RunPython.noop),
    ]

"""Hand every unfinished job back to the runner (after a restart or a lost queue).

In-process jobs live in the web process's thread pool, and a broker can lose its messages
(a flushed Redis): the Job rows stay queued, paused or running. This sends one run request
per scope with unfinished work, of every kind (a rewind's vector delete left queued by a
process that died before running it included); the runner's claim step re-queues jobs
whose runner died and keeps the turn order. Safe to run at any time (a busy scope ignores the request).
"""

from __future__ import annotations

from django.core.management.base import BaseCommand

from studio.memory import jobs
from studio.memory.models import Job


class Command(BaseCommand):
    help = "Re-dispatch unfinished jobs (queued, paused, or running under a dead runner)."

    def handle(self, *args, **options):
        unfinished = Job.objects.filter(status__in=jobs.UNFINISHED).order_by(
            "game_save_id", "universe_id", "turn_id", "id"
        )
        sent = set()
        for job in unfinished:
            scope = ("save", job.game_save_id) if job.game_save_id else ("universe", job.universe_id)
            if scope in sent:
                continue
            sent.add(scope)
            jobs.send(job.pk)
        jobs.shutdown_inprocess_runner(wait=True)
        self.stdout.write(f"Dispatched {len(sent)} scope(s) with unfinished jobs.")

"""The registry's rewind: what every path that takes a save back to turn N does, in one place.

`timeline_rewind(save, n)` rolls every registered per-turn table back to N
(`timeline.roll_back`), carries the save's per-turn jobs to a new timeline generation (those
of the dropped turns write nothing; running ones that read rewound memory are redone:
`jobs.job_timeline_rewind`), moves the save to turn N and that generation, and runs the
tables' `rewound` hooks (a living save's rolled-back mental models get their refresh
queued). The rewind (`studio.saves.checkpoints`) and the demo's trim
(`studio.universes.demo.loader`) both call it; neither rolls back a table of its own.

Runs in the caller's transaction, the save's row locked by the caller; it never commits.
The vector chunks after N are outside the database: the caller deletes them after commit.
"""

from __future__ import annotations

from django.utils import timezone

from studio.memory import jobs, timeline

__all__ = ["timeline_rewind"]


def timeline_rewind(save, n: int, *, hooks: bool = True) -> dict[str, int]:
    """Rewind `save` (locked, as read before the rewind) to turn `n`; return the tables' counts.

    `save` is updated in place (its `current_turn` and `timeline_generation`). `hooks=False`
    leaves the `rewound` hooks to the caller (`timeline.rewound(save, n, counts)`), for one
    that queues work of its own first.
    """
    counts = timeline.roll_back(save, n)
    generation = save.timeline_generation + 1
    # Jobs of the kept turns go on to the new timeline; those of dropped turns write nothing.
    jobs.job_timeline_rewind(
        game_save=save, target_turn=n, generation=generation, memory_rewound=timeline.memory_rewound(counts)
    )
    type(save).objects.filter(pk=save.pk).update(
        current_turn=n, timeline_generation=generation, updated_at=timezone.now()
    )
    save.current_turn, save.timeline_generation = n, generation
    if hooks:
        timeline.rewound(save, n, counts)
    return counts

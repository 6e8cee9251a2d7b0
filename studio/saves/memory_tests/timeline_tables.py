"""Memory-test results in the timeline registry (registered by `SavesConfig.ready()`).

A result row never changes once recorded (a run at the same turn replaces it with a new row),
so the table is plain: a rewind to N deletes the rows after N (the results that stand are those
recorded by N), a fork copies the rows up to N, the save file's `memory_test_results` section
carries them.
"""

from __future__ import annotations

from studio.memory import timeline
from studio.saves.memory_tests.models import MemoryTestResult

TABLE = timeline.TurnTable.plain(
    "memory_test_results", MemoryTestResult, order=95, section="memory_test_results", label="Memory test results"
)


def register() -> None:
    timeline.register_table(TABLE)

"""Memory tests on saves: judge a universe's tests on a save, record the results per turn.

The tests themselves are the universe's (`studio/universes/memory_tests/`: the declarative
form, its rows, their writes and Universe-as-Code); this package runs them, because judging a
`context` test builds the narrator's prompt (`saves/narrator/prompt.py`):

- `models.py`: MemoryTestResult, one row per test and turn (the verdict, the summary, the
  explain records, the test as it ran);
- `judges.py`: one judge per kind over the studio's own machinery (who knows what, the
  narrator's prompt, beliefs and trends, the guard's findings);
- `findings.py`: the interface `no_findings` tests read the continuity guard through;
- `services.py`: `memory_tests_run` (one save, recorded at its turn), `memory_tests_run_many`;
- `selectors.py`: results as they stood at a turn, the turns with results;
- `timeline_tables.py`, `portable.py`: the results in the timeline registry and the save file.

Docs: docs/authoring.md "Memory tests".
"""

"""The continuity guard: a proposed narration checked against memory before it is accepted (docs/continuity.md).

- `text.py`: a narration as sentences, each with who says or does it (the names rule);
- `checks.py`: what a check reads at turn N (`GuardContext`) and the deterministic checks: leaks, presence;
- `contradictions.py`: possible contradictions found by search, and the model's judge (a JSON schema citing
  the item and its turn);
- `guard.py`: `continuity_check`, the one entry point (the Console, the API, the memory proxy, the bench);
- `findings.py`: `Finding` and `CheckResult`, and a finding as an instruction to the narrator;
- `settings.py`: the guard's Universe_Meta knobs (off / warn / regenerate, the judge, its spend cap);
- `models.py`: `ContinuityFinding`, the findings as rows of their turn; `services.py` writes them,
  `selectors.py` reads them; `timeline_tables.py` registers them with the timeline registry.
"""

"""Who knows what: presence per turn, reveals, `known_by`, and the context by point of view.

- `models.py`: Presence and Reveal (rows keyed by save and turn; tables of the memory app);
- `names.py`: names to canonical characters (Lore Book titles and keys; factions' members);
- `presence.py`: presence from the turn state, the playtester, the extractor, and the carry;
- `reveals.py`: reveal events (a fact or a lore entry becomes known to a character at turn N);
- `derive.py`: `KnowledgeView`, what a character knows at turn N and why (derived, never stored);
- `pov.py`: the memory context's point-of-view sections and narrator-only marks;
- `selectors.py`: the pages' reads (who knows what at N, a character's timeline, lore checks);
- `timeline_tables.py`: the two tables' registrations in the timeline registry.

Docs: docs/knowledge.md.
"""

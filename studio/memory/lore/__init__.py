"""What the engine keeps about a Lore Book: the lore activation state of a save at each turn
(which entries activated, their timed windows: `activation_state`, with the compiled book
it was evaluated with) and each entry's embedding state (`embedding_state`). The activation
rules themselves, with `CompiledBook`, are `studio.memory.lore_activation`; the three terms
are in docs/architecture.md, "Glossary"."""

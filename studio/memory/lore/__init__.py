"""A save's Lore Book state kept by the engine: which entries activated at each turn with
their timed windows (`activation_state`), and each entry's embedding state
(`embedding_state`). The activation rules themselves are `studio.memory.lore_activation`."""

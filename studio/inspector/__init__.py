"""The memory inspector: the pages that show a save's memory (search playground, facts,
beliefs, mental models, context, lore replay, jobs).

An app above `studio.saves` (it uses the saves pages' access checks and layout) over the
engine's selectors and services; the engine (`studio.memory`) knows nothing of it. Its URL
namespace and template names stay "memory" (`memory:facts`, "memory/facts.html").
"""

"""Impersonate: the model writes the player's next action for the action box.

Nothing is stored but the call log (`TrackedLLM`, operation "impersonate"). The model reads
the recent turns as the narrator's prompt shows them (the story-so-far window at the
narrator's budget) and the input mode (do / say / story) it should write in.
"""

from __future__ import annotations

from dataclasses import dataclass

from studio.memory.llm import TrackedLLM, get_llm_backend
from studio.world.models import Save

IMPERSONATE_INSTRUCTIONS = (
    'You write the player\'s next action in an interactive story. The player character ("you") is {name}. '
    'Answer with one or two short sentences in the second person ("You ..."): what the player character does or '
    "says next, consistent with the story so far. Do not narrate what happens as a result."
)


def _recent_turns_text(game_save: Save, *, universe_meta: dict[str, str], fill) -> str:
    """The recent turns as the narrator's prompt shows them: the story-so-far window of
    `studio.memory.chapters.story` (the open chapter's turns that fit its share of the
    narrator's budget, the universe's `context_budget`, at least the last few), "Turn N (story
    time)", the action, the narration."""
    from studio.memory.chapters.story import story_items
    from studio.memory.recall.context import ContextItem
    from studio.memory.recall.context_lore import window_plan
    from studio.saves.narrator.prompt import narrator_budget

    # As build_memory_context plans the window (context_lore.window_plan; the test compares the two windows).
    story = story_items(
        game_save,
        horizon=game_save.current_turn,
        token_budget=narrator_budget(universe_meta),
        **window_plan(universe_meta),
        make_item=ContextItem.of,
        fill=fill,
    )
    return "\n\n".join(item.text for item in story.turns if item.included)


@dataclass
class Impersonation:
    text: str
    model: str
    latency_ms: int


def impersonate(*, game_save: Save, mode: str = "do") -> Impersonation:
    """Return the player's next action as the model writes it (for the action box); log the call.

    Raise NoModelConnected without an endpoint, SpendLimitExceeded / LLMError when the call fails.
    """
    from studio.saves.narrator.sampler import resolve_sampler
    from studio.saves.narrator.services import NO_MODEL, NoModelConnected
    from studio.memory.recall.macros import macro_names_from_meta, play_meta

    backend = get_llm_backend()
    if backend is None:
        raise NoModelConnected(NO_MODEL)
    universe_meta = game_save.universe.meta_values()  # read once: the meta and the shares
    meta = play_meta(universe=game_save.universe, save=game_save, universe_meta=universe_meta)
    names = macro_names_from_meta(meta)
    recent = _recent_turns_text(game_save, universe_meta=universe_meta, fill=names.fill) or "(the story has not begun)"
    kind = {"say": "what the player character says next", "story": "the next line of the story"}.get(
        mode, "what the player character does next"
    )
    prompt = names.fill(f"## Recent turns\n{recent}\n\nWrite {kind}, as the player would type it.")
    system = IMPERSONATE_INSTRUCTIONS.format(name=names.user or "the player character")
    options = resolve_sampler(game_save=game_save, meta=meta).request_options()
    options["max_tokens"] = min(int(options.get("max_tokens") or 120), 120)
    response = TrackedLLM(backend, game_save_id=game_save.pk).chat(
        system=system, prompt=prompt, operation="impersonate", **options
    )
    text = response.text.strip().strip('"').strip()
    return Impersonation(text=text[:4000], model=response.model or "", latency_ms=response.latency_ms or 0)

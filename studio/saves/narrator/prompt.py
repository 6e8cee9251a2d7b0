"""Build the narrator prompt: the author's instructions template, meta, recent turns, memory.

The instructions (the system message) come from the universe's `narrator_instructions`
meta key, a template the author edits per universe (Universe-as-Code carries it in
`[extra]`); without one, `DEFAULT_INSTRUCTIONS`. Placeholders are `{{key}}` with a meta key
(`{{narrator_style}}`, `{{tone}}`, `{{player_character}}`, `{{era}}`, `{{scenario}}`, any
other key the author set) and `{{meta}}`, which lists the other short meta values as
`key: value` lines.
The player's persona (`studio.memory.recall.macros.persona_from_meta`): `{{player_character}}`
is its name, `{{player_description}}` its description, which reaches the narrator once: where
the template places it, else as one line after the instructions (a template written before
personas existed still gets it). The universe's scenario (its opening's `scenario`,
`studio.universes.opening`: the situation when the story starts, SillyTavern's card
scenario) reaches it the same way, whole whatever its length, once: where the template puts
`{{scenario}}` (the default instructions' "Scenario:" line, as SillyTavern's story string
writes it), else as its own part after the instructions; never as a `{{meta}}` line. Both
are in the system message, which stays the same from turn to turn (the cache-first layout:
a model server's prefix cache keeps them with the instructions).
A line whose placeholders are all empty is left out (no "Tone: " with nothing after it); a
placeholder naming no meta key is left as written, so a typo shows in the preview. Then the
`{{user}}` / `{{char}}` macros are filled with the names the memory context was built with
(`MemoryContext.macros`, from `studio.memory.recall.macros.macro_names`: the player character;
the card's character, else the first character in focus who is not the player).

Meta is read live from the universe (an edit of the template applies to the next
narration) over the save's copy made at creation (keys the universe no longer has):
`studio.memory.recall.macros.play_meta`.

The user message holds the memory context (`next_turn_context`, the path the Context viewer,
the API and the memory proxy take too, with the narrator's defaults: the player character in
focus, and the narrator's budget, the universe's `context_budget` else 2,000 tokens:
`narrator_budget`), printed by the one renderer (`MemoryContext.text`,
`studio.memory.recall.render`) in the one layout (`studio.memory.recall.layout.LAYOUT`: from
what changes least to what changes most, so a model server's prefix cache reuses most of the
previous turn's prompt), then the player's action and the closing instruction. The memory is
one part of the message, printed as the Context viewer and the API show it, byte for byte;
the author's note goes between the parts (`authors_note.with_authors_note`), never inside the
memory.
"""

from __future__ import annotations

import dataclasses

import re
from dataclasses import dataclass

from studio.memory.recall.context import next_turn_context
from studio.memory.recall.policy import DEFAULT_CONTEXT_BUDGET, context_budget_from_meta
from studio.memory.llm import estimate_tokens
from studio.memory.recall.macros import (
    CHARACTER_CARD_META,
    PLAYER_CHARACTER_META,
    PLAYER_DESCRIPTION_META,
    PLAYER_PORTRAIT_META,
    MacroNames,
    macro_names_from_meta,
    persona_from_meta,
    play_meta,
)
from studio.memory.recall.query_params import LIMITS, ContextParams, InvalidParameters
from studio.saves.narrator.authors_note import with_authors_note
from studio.universes.meta_keys import KNOWN_META_KEYS, SETTINGS_GROUPS
from studio.universes.opening import SCENARIO_META, opening_from_meta

TEMPLATE_KEY = "narrator_instructions"
KNOWN_KEYS = ("narrator_style", "tone", PLAYER_CHARACTER_META, PLAYER_DESCRIPTION_META, "era", SCENARIO_META)
# Meta that is structured data or a setting for other parts of the studio, never prose for {{meta}}: every known
# key of a settings group (samplers, lore activation, the memory budget and its shares, chapters, missions,
# imports), and a few more.
NOT_PROSE = {
    TEMPLATE_KEY,
    CHARACTER_CARD_META,
    "lore_activation",
    PLAYER_PORTRAIT_META,
    *(f"sampler_{n}" for n in ("frequency_penalty", "repeat_penalty")),
    *(k.key for k in KNOWN_META_KEYS if k.group in SETTINGS_GROUPS),
}

DEFAULT_INSTRUCTIONS = """You are the narrator of an interactive story. Continue the story from the player's action.
The player character ("you") is {{player_character}}.
The player character's persona: {{player_description}}
Narration style: {{narrator_style}}
Tone: {{tone}}
Era: {{era}}
{{meta}}
Scenario: {{scenario}}
Write only this turn's narrative, in the second person: one to three short paragraphs. Do not list choices, do not \
add headings, and do not act or speak for the player beyond the action they gave. Stay consistent with the memory \
below; never contradict it."""

_PLACEHOLDER = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_.-]*)\s*\}\}")
_MACROS = {"user", "char"}


@dataclass(frozen=True)
class NarratorConfig:
    """The narrator's tunables (chosen by hand, not measured: a small model's context)."""

    # The memory context's, story so far included, when the universe sets no `context_budget`
    # (`narrator_budget`; the `context_budget` knob of studio.memory.recall.policy says how 2,000 was chosen).
    token_budget: int = DEFAULT_CONTEXT_BUDGET
    max_meta_value_chars: int = 300  # longer meta values are data, not a line of the prompt
    max_input_chars: int = LIMITS.query_text_chars  # the input is the context's query text


CONFIG = NarratorConfig()


@dataclass
class NarratorPrompt:
    system: str
    user: str
    turn_id: int
    template_is_default: bool
    memory: object  # MemoryContext
    meta: dict[str, str] | None = None  # the meta it was built with (`narrator_meta`), for the sampler to reuse

    @property
    def shown_turns(self) -> list[int]:
        """The turns the prompt shows in full (the open chapter's window)."""
        return list(self.memory.shown_turns)

    @property
    def chars(self) -> int:
        return len(self.system) + len(self.user)

    @property
    def tokens_estimate(self) -> int:
        return estimate_tokens(self.system) + estimate_tokens(self.user)

    def context_record(self) -> dict:
        """Return the memory context as stored with a snapshot (its public dict shape)."""
        return self.memory.as_dict()


def narrator_meta(game_save, *, universe_meta: dict[str, str] | None = None) -> dict[str, str]:
    """Return the meta the narrator reads: the universe's current meta over the save's copy.

    `universe_meta`: the universe's meta rows when the caller has read them (then nothing is queried)."""
    return play_meta(universe=game_save.universe, save=game_save, universe_meta=universe_meta)


def narrator_budget(universe_meta: dict[str, str], config: NarratorConfig = CONFIG) -> int:
    """Return the narrator's memory context budget in tokens: the universe's `context_budget`, else
    `config.token_budget`. The narrator's prompt, impersonation's window and the memory proxy all read it here."""
    return context_budget_from_meta(universe_meta, default=config.token_budget)


def render_instructions(
    template: str, meta: dict[str, str], *, config: NarratorConfig = CONFIG, macros: MacroNames | None = None
) -> str:
    """Return the instructions `template` with its placeholders filled from `meta`, its macros with `macros`.

    Without `macros`, who `{{user}}` / `{{char}}` are is read from `meta` (nobody in focus).
    """
    used = set(_PLACEHOLDER.findall(template))
    others = [
        f"{key}: {value.strip()}"
        for key, value in sorted(meta.items())
        if key not in used
        and key not in KNOWN_KEYS
        and key not in NOT_PROSE
        and value.strip()
        and len(value) <= config.max_meta_value_chars
        and "\n" not in value.strip()
    ]
    values = {key: meta.get(key, "").strip() for key in KNOWN_KEYS}
    values.update({key: value.strip() for key, value in meta.items()})
    persona = persona_from_meta(meta)  # the name alone; the description once (module docstring)
    values[PLAYER_CHARACTER_META], values[PLAYER_DESCRIPTION_META] = persona.name, persona.description
    scenario = values[SCENARIO_META] = opening_from_meta(meta).scenario  # whole, once (module docstring)
    values["meta"] = "\n".join(others)
    lines = []
    for line in template.splitlines():
        names = [n for n in _PLACEHOLDER.findall(line) if n not in _MACROS]
        known = [n for n in names if n in values]
        if names and known and len(known) == len(names) and not any(values[n] for n in known):
            continue  # every placeholder of the line is empty
        lines.append(
            _PLACEHOLDER.sub(
                lambda m: values.get(m.group(1), m.group(0)) if m.group(1) not in _MACROS else m.group(0), line
            )
        )
    text = "\n".join(lines).strip()
    if scenario and SCENARIO_META not in used:  # a template without {{scenario}} still gets it, as its own part
        text += f"\n\nScenario: {scenario}"
    if persona.description and PLAYER_DESCRIPTION_META not in used:
        text += f"\nThe player character ({persona.name or 'you'}): {persona.description}"
    return (macros or macro_names_from_meta(meta)).fill(text)


class InvalidPlayerInput(ValueError):
    """The player's action cannot be used as the memory query (e.g. it holds a NUL character)."""


def check_player_input(
    player_input: str, config: NarratorConfig = CONFIG, *, universe_meta: dict[str, str] | None = None
) -> ContextParams:
    """Return the memory query for `player_input` at the narrator's budget (`narrator_budget` of
    `universe_meta`; without it, the built-in one: enough to check the input); raise InvalidPlayerInput
    (a clear message) if unusable."""
    budget = config.token_budget if universe_meta is None else narrator_budget(universe_meta, config)
    try:
        return ContextParams(query_text=player_input, token_budget=budget)
    except InvalidParameters as exc:
        reason = str(exc).removeprefix("query_text: ")  # the query is the action itself
        raise InvalidPlayerInput(f"The player's action cannot be used: {reason}") from exc


def build_narrator_prompt(
    *, game_save, player_input: str, config: NarratorConfig = CONFIG, vector_memory=None, pov=None
) -> NarratorPrompt:
    """Return the whole prompt the narrator gets for `player_input` as the save's next turn.

    `pov`: the characters whose point of view the memory carries (None: those on scene;
    studio.memory.knowledge.pov). Raise InvalidPlayerInput when the action cannot be used
    (`check_player_input`). The universe's meta is read once: the instructions, the memory budget
    (`narrator_budget`) and the memory context all come from that read."""
    universe_meta = game_save.universe.meta_values()
    meta = narrator_meta(game_save, universe_meta=universe_meta)
    template = meta.get(TEMPLATE_KEY, "").strip()
    params = check_player_input(player_input, config, universe_meta=universe_meta)
    memory = next_turn_context(
        game_save=game_save,
        params=params if pov is None else dataclasses.replace(params, pov=tuple(pov)),
        vector_memory=vector_memory,
        universe_meta=universe_meta,
    )
    macros = MacroNames(**memory.macros)
    system = render_instructions(template or DEFAULT_INSTRUCTIONS, meta, config=config, macros=macros)
    turn_id = game_save.current_turn + 1
    parts = [
        macros.fill(
            f"## The player's action (turn {turn_id})\n" + (player_input.strip() or "(no action: continue the scene)")
        ),
        f"Narrate turn {turn_id}.",
    ]
    # The memory as the renderer prints it (its macros filled), then the action; the note between parts.
    parts = [macros.fill(part) for part in with_authors_note([memory.text, *parts], game_save)]
    user = "\n\n".join(parts)
    return NarratorPrompt(
        system=system, user=user, turn_id=turn_id, template_is_default=not template, memory=memory, meta=meta
    )

"""The Universe_Meta keys the studio reads: one table (group, key, help, default) for the Metadata page.

The Metadata page offers these keys with their help and the value play uses when a key is
not set, and keeps the author's free keys below them. What checks a value is
`services.meta_validate` (the known integer, boolean and JSON keys); this table only
explains. The memory context's knobs (its budget, shares, reserve and cap, the point of view,
the memory proxy's placement) are not restated here: their rows are made from their one
declaration, `studio.memory.recall.policy.KNOBS`, which `meta_validate` checks against too. Keys owned by other pages say where they are edited (`edited_on`): the persona on
this page's persona form, missions on the Missions page, imported files' fields by the
importers.
"""

from __future__ import annotations

from dataclasses import dataclass

from studio.memory.lore_activation import (
    META_CASE_SENSITIVE,
    META_MATCH_WHOLE_WORDS,
    META_RECURSION_DEPTH,
    META_SCAN_DEPTH,
    META_TOKEN_BUDGET,
)
from studio.memory.chapters.selectors import (
    CHAPTERS_PER_ARC_META,
    MIN_TURNS_META,
    SCENE_CHANGE_META,
    TURNS_PER_CHAPTER_META,
    ChapterSettings,
)
from studio.memory.lore_activation.spec import LoreDefaults
from studio.memory.continuity.settings import GUARD_GROUP, GUARD_KNOBS
from studio.memory.recall.policy import BUDGET_GROUP, KNOBS, LAYOUT_GROUP, PROXY_GROUP
from studio.universes.opening import ALTERNATE_GREETINGS_META, FIRST_MESSAGE_META, SCENARIO_META
from studio.memory.recall.macros import (
    CHARACTER_CARD_META,
    PLAYER_CHARACTER_META,
    PLAYER_DESCRIPTION_META,
    PLAYER_PORTRAIT_META,
)

NARRATOR_TEMPLATE_META = "narrator_instructions"  # saves/narrator/prompt.py TEMPLATE_KEY (a layer above)


@dataclass(frozen=True)
class MetaKey:
    key: str
    group: str
    help: str
    default: str = ""  # what play uses when the key is not set ("" = nothing)
    edited_on: str = ""  # "persona" / "missions" / "import": set elsewhere, shown here
    multiline: bool = False


_LORE = LoreDefaults()
_CHAPTERS = ChapterSettings()
PERSONA, OPENING, NARRATOR, SAMPLER, LORE, CHAPTERS, MISSIONS, IMPORTED = (
    "Player persona",
    "Opening",
    "Narrator",
    "Sampler settings",
    "Lore activation",
    "Chapters",
    "Missions",
    "Imported files",
)
BUDGET = BUDGET_GROUP
# Groups whose keys are settings or structured data for the studio, never prose for the narrator's {{meta}}
# (the opening's greetings are turn 1 itself, not instructions).
SETTINGS_GROUPS = (OPENING, SAMPLER, LORE, BUDGET, LAYOUT_GROUP, PROXY_GROUP, GUARD_GROUP, CHAPTERS, MISSIONS, IMPORTED)

KNOWN_META_KEYS: tuple[MetaKey, ...] = (
    MetaKey(
        PLAYER_CHARACTER_META,
        PERSONA,
        "The player character's name: {{user}} in lore and prompts, and who “you” is in facts, "
        "beliefs and mental models.",
        edited_on="persona",
    ),
    MetaKey(
        PLAYER_DESCRIPTION_META,
        PERSONA,
        "Who the player character is, for the narrator alone (once per prompt); never part of a fact or a name.",
        edited_on="persona",
        multiline=True,
    ),
    MetaKey(PLAYER_PORTRAIT_META, PERSONA, "The persona's portrait (a kept PNG).", edited_on="persona"),
    MetaKey(
        FIRST_MESSAGE_META,
        OPENING,
        "Turn 1 as the narrator tells it: the story's first message (SillyTavern's "
        "first_mes); {{user}} and {{char}} are filled when play reads it.",
        edited_on="opening",
        multiline=True,
    ),
    MetaKey(
        ALTERNATE_GREETINGS_META,
        OPENING,
        "Other first messages to start from (a JSON array of strings), "
        "chosen on the new-save form or with the arrows of the opening.",
        edited_on="opening",
    ),
    MetaKey(
        SCENARIO_META,
        NARRATOR,
        "The situation when the story starts, for the narrator: whole, in its "
        "instructions where {{scenario}} stands, else after them (the opening form edits it).",
        edited_on="opening",
        multiline=True,
    ),
    MetaKey("narrator_style", NARRATOR, "How the narrator writes, e.g. “terse, present tense”: {{narrator_style}}."),
    MetaKey("tone", NARRATOR, "The story's tone, e.g. “melancholy”: {{tone}}."),
    MetaKey("era", NARRATOR, "When the story happens, e.g. “1890s”: {{era}}."),
    MetaKey(
        NARRATOR_TEMPLATE_META,
        NARRATOR,
        "The narrator's instructions, a template: {{narrator_style}}, {{tone}}, {{player_character}}, "
        "{{player_description}}, {{era}}, {{scenario}}, any other key, {{meta}} and {{user}} / {{char}} are filled in "
        "(preview it from a save's Console).",
        default="the built-in instructions",
        multiline=True,
    ),
    MetaKey(
        "sampler_temperature",
        SAMPLER,
        "Narrator sampling temperature (0-2); a save may override it.",
        default="the environment's",
    ),
    MetaKey("sampler_top_p", SAMPLER, "Narrator nucleus sampling, top-p (0-1).", default="the environment's"),
    MetaKey("sampler_max_tokens", SAMPLER, "Most tokens one narration may take.", default="the environment's"),
    MetaKey(
        "sampler_repetition_penalty", SAMPLER, "Narrator repetition penalty (1 = none).", default="the environment's"
    ),
    MetaKey(
        META_SCAN_DEPTH,
        LORE,
        "Messages a lore entry's keys are matched against; the pending input is 1, a turn is 2.",
        default=str(_LORE.scan_depth),
    ),
    MetaKey(
        META_RECURSION_DEPTH,
        LORE,
        "Passes after the first scan in which activated entries' text may "
        "activate more entries; 0 = off (new universes start at 0, as SillyTavern).",
        default=str(_LORE.recursion_depth),
    ),
    MetaKey(
        META_TOKEN_BUDGET,
        LORE,
        "Tokens the activated entries may use; 0 = no budget at this stage.",
        default=str(_LORE.token_budget),
    ),
    MetaKey(
        META_CASE_SENSITIVE,
        LORE,
        "true or false: keys match only in the same case.",
        default=str(_LORE.case_sensitive).lower(),
    ),
    MetaKey(
        META_MATCH_WHOLE_WORDS,
        LORE,
        "true or false: keys match whole words only.",
        default=str(_LORE.match_whole_words).lower(),
    ),
    *(MetaKey(knob.meta_key, knob.group, knob.help, default=knob.default_text()) for knob in KNOBS if knob.meta_key),
    *(MetaKey(knob.meta_key, knob.group, knob.help, default=knob.default_text()) for knob in GUARD_KNOBS),
    MetaKey(
        TURNS_PER_CHAPTER_META,
        CHAPTERS,
        "A chapter closes when it holds this many turns (0: no limit).",
        default=str(_CHAPTERS.turns_per_chapter),
    ),
    MetaKey(
        SCENE_CHANGE_META,
        CHAPTERS,
        "true or false: a turn whose state's location differs from the previous turn's "
        "starts a new chapter (once the open chapter holds chapter_min_turns turns).",
        default=str(_CHAPTERS.on_scene_change).lower(),
    ),
    MetaKey(
        MIN_TURNS_META,
        CHAPTERS,
        "Turns a chapter holds before a scene change may close it.",
        default=str(_CHAPTERS.min_turns),
    ),
    MetaKey(
        CHAPTERS_PER_ARC_META,
        CHAPTERS,
        "This many consecutive chapters (or arcs) roll up into an arc one level up (0: no arcs).",
        default=str(_CHAPTERS.chapters_per_arc),
    ),
    MetaKey(
        "belief_mission", MISSIONS, "The universe-wide belief mission (text).", edited_on="missions", multiline=True
    ),
    MetaKey(
        "belief_missions",
        MISSIONS,
        'Per-character missions: a JSON object, {"Name": "mission"}.',
        edited_on="missions",
        multiline=True,
    ),
    MetaKey(
        CHARACTER_CARD_META,
        IMPORTED,
        "The Character entry of the last imported Character Card (JSON object: "
        "entry_id, name, spec); the card's fields are shown from that entry.",
        edited_on="import",
    ),
    MetaKey(
        "character_book",
        IMPORTED,
        "Fields of an imported character_book (JSON object), kept for re-export.",
        edited_on="import",
    ),
    MetaKey(
        "sillytavern_world",
        IMPORTED,
        "Fields of an imported SillyTavern world-info file (JSON object).",
        edited_on="import",
    ),
)
KNOWN_BY_KEY = {item.key: item for item in KNOWN_META_KEYS}


def known_key_groups(values: dict[str, str]) -> list[tuple[str, list[dict]]]:
    """Return [(group, [{"meta": MetaKey, "value": str | None}])] in table order, with the universe's values."""
    groups: dict[str, list[dict]] = {}
    for item in KNOWN_META_KEYS:
        groups.setdefault(item.group, []).append({"meta": item, "value": values.get(item.key)})
    return list(groups.items())

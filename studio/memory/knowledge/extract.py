"""Who is present and who told whom, asked of the living-mode extractor with the facts.

The fact extraction (`studio.memory.factextract`) keeps its contract: `extract_facts`
returns the same facts from the same prompt. When the living pipeline passes a `Scene` to
`extract_facts_detailed(..., scene=...)`, the same call also asks:

- `present` (top level): the characters in the scene of the passage, from the known names;
- per fact, `told_by` / `told_to`: when the fact is something one character tells others.

`SCENE_PROMPT` is added to the user prompt and `extend_schema` adds the optional fields to
the schema (not required: a model that leaves them out still answers the facts). What the
model answers is cleaned here: names mapped onto the known characters (anything else is
dropped: a presence of invented names is worse than none), `told_to` without the speaker.
The pipeline then records presence (source `extractor`, never over the state's or the
playtester's) and one reveal per listener of each told fact.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

from studio.memory.llm.normalise import fold

__all__ = ["Scene", "SCENE_PROMPT", "extend_schema", "parse_scene"]

SCENE_PROMPT = (
    "Also answer `present`: the names of the characters who are in the scene of this passage (only names "
    "from the known characters below). When a fact is something one character tells others, add `told_by` "
    "(the speaker) and `told_to` (the listeners) to that fact; otherwise leave them out.\n"
    "Known characters: {names}"
)


@dataclass
class Scene:
    """What the extractor said about the scene: filled by `parse_scene` from the answer."""

    characters: list[str]
    present: list[str] = field(default_factory=list)
    told: dict[int, tuple[str, list[str]]] = field(default_factory=dict)  # fact position -> (speaker, listeners)

    def prompt(self) -> str:
        return SCENE_PROMPT.format(names="; ".join(self.characters))

    def canonical(self, raw) -> str:
        names = {fold(n): n for n in self.characters}
        return names.get(fold(" ".join(str(raw or "").split())), "")


def extend_schema(schema: dict) -> dict:
    """Return the fact schema with the optional `present`, `told_by` and `told_to` fields."""
    string = {"type": "string"}
    names = {"type": "array", "items": string, "maxItems": 20}
    schema = json.loads(json.dumps(schema))
    schema["properties"]["present"] = names
    fact = schema["properties"]["facts"]["items"]
    fact["properties"]["told_by"] = string
    fact["properties"]["told_to"] = names
    return schema


def _document(text: str):
    cleaned = re.sub(r"^```(?:json)?|```$", "", (text or "").strip(), flags=re.MULTILINE).strip()
    try:
        return json.loads(cleaned)
    except ValueError:
        start, end = cleaned.find("{"), cleaned.rfind("}")
        try:
            return json.loads(cleaned[start : end + 1]) if start >= 0 < end else None
        except ValueError:
            return None


def _names(scene: Scene, value) -> list[str]:
    raw = value if isinstance(value, list) else re.split(r",| and ", value) if isinstance(value, str) else []
    out: list[str] = []
    for item in raw:
        name = scene.canonical(item)
        if name and name not in out:
            out.append(name)
    return out


def parse_scene(text: str, scene: Scene, statements: list[str], items_statements: list[str] | None = None) -> Scene:
    """Fill `scene` from the answer `text`; `statements` are the kept facts' statements, in order.

    A fact's `told_by` / `told_to` are matched to the kept fact of the same statement (the
    parser drops repeats and placeholders, so positions in the answer are not the kept ones).
    """
    document = _document(text)
    if isinstance(document, list):
        document = {"facts": document}
    if not isinstance(document, dict):
        return scene
    scene.present = _names(scene, document.get("present"))
    keys = {fold(s): i for i, s in enumerate(statements)}
    for item in document.get("facts") or []:
        if not isinstance(item, dict):
            continue
        position = keys.get(fold(str(item.get("statement") or "")))
        if position is None:
            continue
        speaker = scene.canonical(item.get("told_by"))
        listeners = [n for n in _names(scene, item.get("told_to")) if n != speaker]
        if listeners:
            scene.told[position] = (speaker, listeners)
    return scene

"""Continue: the narrator's request to extend a narration, and the extended text.

Used by the Console's Continue (`services.narration_stream` for an alternative with a
`prefix`) and by the API's `continue_once` (`play.py`).
"""

from __future__ import annotations

CONTINUE_INSTRUCTION = (
    "## The narration so far (turn {turn})\n{text}\n\nContinue this narration from exactly where it stops, in the "
    "same style. Do not repeat what is already written."
)


def continue_prompt(user: str, *, prefix: str, turn_id: int) -> str:
    """Return the narrator's user message asking to extend `prefix` (a continued one's request is replaced)."""
    user = user.split("\n\n## The narration so far (turn", 1)[0]
    return f"{user.rstrip()}\n\n{CONTINUE_INSTRUCTION.format(turn=turn_id, text=prefix.strip())}"


def join_continuation(prefix: str, addition: str) -> str:
    """Return `prefix` extended by `addition` (a space between words, nothing before punctuation)."""
    prefix, addition = prefix.rstrip(), addition.strip()
    if not addition:
        return prefix
    if addition[0] in ",.;:!?)\u2019'" or prefix.endswith("\n"):
        return prefix + addition
    return f"{prefix} {addition}"

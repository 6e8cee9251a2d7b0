"""Read a chat front end's `messages` as turns, and place the memory context in them.

A front end sends its whole prompt on every request: its system prompts (the character
card, the scenario, world info, author's notes, example dialogue, "[Start a new chat]"),
the chat itself, and whatever it injects between the chat's messages. The proxy reads the
chat as the save's turns:

- every `system` (or `developer`) message is the front end's own and is ignored, wherever it
  stands; so are messages of any other role (`tool`, `function`);
- consecutive messages of the same role are one message (joined with a blank line);
- assistant messages before the first user message are the greeting (the character's first
  message) and are ignored: a turn is a player's input and the narration that answered it;
- the messages before the last user message pair up as settled turns (input, narration);
- the last user message is the turn being asked for (`pending_input`). An assistant message
  after it (a "continue" request, or an impersonation, which SillyTavern sends after the last
  chat message) makes the request one whose answer is never a turn's narration:
  `records_answer` is False.

Text is compared stripped of surrounding white space; a content given as a list of parts
(the vision format) counts by its text parts. A message with an unknown role, or a chat
message that its turn could not store (over the turn's input or narration limit, or holding
NUL: `studio/limits.py`, the API's and the save file's limits) is refused, `InvalidMessages`
naming it (`param`), before anything is written.

`inject(messages, block, note=)` returns the messages with the memory placed, the chat's own
messages untouched around it: with a `{{axiom_memory}}` marker, the whole memory (`block`, then
`note`) at the first marker (every other marker is removed); without one, `block` (what stays
the same from one request to the next) as a system message right after the leading system
messages (at the start when there is none), and `note` (what changes with each request) as a
system message after the chat's last message, depth 0 (before the front end's own trailing
system messages: its post-history instructions, a continue or impersonate instruction). A
prefix cache then reuses the front end's prompt up to the chat's newest message.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field

from studio import limits

MARKER = "{{axiom_memory}}"
SYSTEM_ROLES = {"system", "developer"}
CHAT_ROLES = {"user", "assistant"}
KNOWN_ROLES = SYSTEM_ROLES | CHAT_ROLES | {"tool", "function"}


class InvalidMessages(ValueError):
    """`messages` is not a chat-completions message list (`param`: where, e.g. "messages[3].role")."""

    def __init__(self, message: str, param: str | None = "messages"):
        super().__init__(message)
        self.param = param


@dataclass(frozen=True)
class Chat:
    """The chat a request carries, read as turns."""

    turns: list[tuple[str, str]] = field(default_factory=list)  # settled (input, narration) pairs
    pending_input: str | None = None  # the last user message: the turn asked for
    trailing_answer: str | None = None  # an assistant message after it (continue, impersonate)
    greeting: str = ""

    @property
    def records_answer(self) -> bool:
        """True when the answer to this request is a proposal for the pending turn's narration."""
        return self.pending_input is not None and self.trailing_answer is None


def content_text(content) -> str:
    """Return a message content's text: the string, or the text parts of a list, joined."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if isinstance(part, dict) and part.get("type") == "text" and isinstance(part.get("text"), str):
                parts.append(part["text"])
            elif isinstance(part, str):
                parts.append(part)
        return "\n".join(parts)
    raise InvalidMessages(f"a message content must be a string or a list of parts, not {type(content).__name__}")


def _check_parts(content, where: str) -> None:
    """A list content is parts: objects with a string `type` (a `text` part holds a string `text`), or strings."""
    if not isinstance(content, list):
        return
    for index, part in enumerate(content):
        if isinstance(part, str):
            continue
        if not isinstance(part, dict) or not isinstance(part.get("type"), str):
            raise InvalidMessages(
                f"{where}[{index}] must be a content part: an object with a string `type`", f"{where}[{index}]"
            )
        if part["type"] == "text" and not isinstance(part.get("text"), str):
            raise InvalidMessages(f"{where}[{index}]: a text part holds its text as a string", f"{where}[{index}].text")


def check_messages(messages) -> list[dict]:
    """Return `messages` if it is a non-empty list of chat messages; else raise InvalidMessages naming where.

    Each is an object with a known `role` (system, developer, user, assistant, tool, function),
    a `content` that is a string, a list of parts or null, and a string `name` if any.
    """
    if not isinstance(messages, list) or not messages:
        raise InvalidMessages("`messages` must be a non-empty list of chat messages")
    for index, message in enumerate(messages):
        where = f"messages[{index}]"
        if not isinstance(message, dict) or not isinstance(message.get("role"), str):
            raise InvalidMessages(f"{where} must be an object with a string `role`", where)
        if message["role"] not in KNOWN_ROLES:
            raise InvalidMessages(
                f"{where}.role is {message['role'][:40]!r}; a role is one of {', '.join(sorted(KNOWN_ROLES))}",
                f"{where}.role",
            )
        if "name" in message and message["name"] is not None and not isinstance(message["name"], str):
            raise InvalidMessages(f"{where}.name must be a string", f"{where}.name")
        try:
            text = content_text(message.get("content"))
        except InvalidMessages as exc:
            raise InvalidMessages(f"{where}: {exc}", f"{where}.content") from None
        _check_parts(message.get("content"), f"{where}.content")
        if limits.NUL in text or limits.LONE_SURROGATE.search(text):  # the prompt is kept with the turn
            raise InvalidMessages(
                f"{where}.content holds a NUL character or a lone UTF-16 surrogate, which the "
                "save (its narrator snapshot) cannot store",
                f"{where}.content",
            )
    return messages


def _check_limit(role: str, text: str, first_index: int) -> None:
    """A chat's message becomes a turn's input (user) or narration (assistant): refuse what a turn cannot hold."""
    field = limits.TURN_INPUT if role == "user" else limits.TURN_NARRATIVE
    problem = field.problem(text)
    if problem:
        raise InvalidMessages(
            f"messages[{first_index}]: the {role} message becomes a turn's {field.label} in the save, and it "
            f"{problem} (the studio's limit for {field.field}, as for the API and save files)",
            f"messages[{first_index}].content",
        )


def read_chat(messages: list[dict]) -> Chat:
    """Return the turns of `messages` (see the module docstring for the rules).

    Raise InvalidMessages for a malformed list, or a chat message (after joining a run of one
    role) that a turn cannot store: over its length limit, or holding NUL.
    """
    merged: list[list] = []  # [role, text, index of the run's first message]
    for index, message in enumerate(check_messages(messages)):
        role = message["role"]
        if role not in CHAT_ROLES:
            continue
        text = content_text(message.get("content")).strip()
        if merged and merged[-1][0] == role:
            merged[-1][1] = f"{merged[-1][1]}\n\n{text}".strip()
        else:
            merged.append([role, text, index])
    for role, text, first_index in merged:
        _check_limit(role, text, first_index)
    greeting = []
    while merged and merged[0][0] == "assistant":
        greeting.append(merged.pop(0)[1])
    trailing = None
    if merged and merged[-1][0] == "assistant" and len(merged) >= 2:
        trailing = merged.pop()[1]
    pending = merged.pop()[1] if merged and merged[-1][0] == "user" else None
    turns = [(merged[i][1], merged[i + 1][1]) for i in range(0, len(merged) - 1, 2)]
    return Chat(turns=turns, pending_input=pending, trailing_answer=trailing, greeting="\n\n".join(greeting))


def _replace_in(content, block: str, first: bool):
    """Return (content with markers replaced, whether a marker was found)."""
    if isinstance(content, str):
        if MARKER not in content:
            return content, False
        if first:
            head, _, tail = content.partition(MARKER)
            return head + block + tail.replace(MARKER, ""), True
        return content.replace(MARKER, ""), True
    if isinstance(content, list):
        found = False
        parts = []
        for part in content:
            if isinstance(part, dict) and isinstance(part.get("text"), str) and MARKER in part["text"]:
                text, _ = _replace_in(part["text"], block, first and not found)
                part = {**part, "text": text}
                found = True
            parts.append(part)
        return parts, found
    return content, False


def inject(messages: list[dict], block: str, *, note: str = "") -> tuple[list[dict], str]:
    """Return (a copy of `messages` with the memory placed, where it went; see the module docstring).

    Where: "marker" (`block` and `note` at the first `{{axiom_memory}}`), else "after_system" or "start"
    for `block` (after the leading system messages, or first), "note" for `note` (after the chat's last
    message), joined with "+" when both are placed ("after_system+note"), or "none" (nothing to place).
    """
    out = copy.deepcopy(messages)
    whole = "\n\n".join(part for part in (block, note) if part)
    placed = None
    for message in out:
        content, found = _replace_in(message.get("content"), whole, placed is None)
        if found:
            message["content"] = content
            placed = placed or "marker"
    if placed:
        return out, placed
    where = []
    if block:
        index = 0
        while index < len(out) and out[index].get("role") in SYSTEM_ROLES:
            index += 1
        out.insert(index, {"role": "system", "content": block})
        where.append("after_system" if index else "start")
    if note:
        last = max((i for i, m in enumerate(out) if m.get("role") in CHAT_ROLES), default=len(out) - 1)
        out.insert(last + 1, {"role": "system", "content": note})
        where.append("note")
    return out, "+".join(where) or "none"

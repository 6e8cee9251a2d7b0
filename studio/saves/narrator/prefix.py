"""How much of a narrator prompt a model server's prefix cache can reuse from the previous one.

llama.cpp (its slot cache, `--cache-reuse`), Ollama and vLLM keep the key-value cache of the
previous request: a new prompt that starts with the same text is read from the cache up to
the first differing character, and only the rest is read anew; hosted APIs bill a cached
prefix at a discount. `prefix_share` measures that for two narrator prompts, the one pure
function the snapshot page ("What the narrator saw at turn N") and `bench/prompt_prefix.py`
both use.

The prompt is compared as the server reads it: the system message, then the user message
(`prompt_text`, joined by a blank line as a chat template lays them out one after the
other). So a system message that changed (the author edited `narrator_instructions` or the
meta it shows) ends the shared part inside the system message, and the whole user message
is new.

What this cannot know: whether the server still holds the previous prompt (another request
to the same slot, a living-mode memory job on the same server, or a restart evicts it), and
where the server's tokens break (it reuses whole tokens, so a few characters fewer). The new
part's tokens are an estimate (`llm.estimate_tokens`, four characters a token), not the
server's count. Pure: no database, no settings.
"""

from __future__ import annotations

from dataclasses import dataclass

from studio.memory.llm import estimate_tokens

SEPARATOR = "\n\n"  # between the system and the user message, as the bench has always counted


def prompt_text(system: str, user: str) -> str:
    """Return the prompt as a chat template lays it out: the system message, then the user message."""
    return system + SEPARATOR + user


def common_prefix_length(a: str, b: str) -> int:
    """Return the length of the longest common prefix of `a` and `b`."""
    limit = min(len(a), len(b))
    index = 0
    while index < limit and a[index] == b[index]:
        index += 1
    return index


@dataclass(frozen=True)
class PrefixShare:
    """What a prompt shares with the previous one, in characters of `prompt_text`."""

    shared_chars: int
    total_chars: int
    new_tokens: int  # estimated tokens after the shared part: what a prefix cache still reads

    @property
    def share(self) -> float:
        """Return the shared fraction of the prompt (0.0 for an empty prompt)."""
        return self.shared_chars / self.total_chars if self.total_chars else 0.0

    @property
    def percent(self) -> int:
        """Return the share in whole percent, rounded down: 100 only when nothing is new."""
        return self.shared_chars * 100 // self.total_chars if self.total_chars else 0


def prefix_share(*, system: str, user: str, previous_system: str, previous_user: str) -> PrefixShare:
    """Return how much of the prompt (`system`, `user`) is a prefix of the previous one."""
    text = prompt_text(system, user)
    shared = common_prefix_length(prompt_text(previous_system, previous_user), text)
    return PrefixShare(shared_chars=shared, total_chars=len(text), new_tokens=estimate_tokens(text[shared:]))


@dataclass(frozen=True)
class MessageSplit:
    """One message cut where the shared part ends: `shared` then `new` is the message."""

    shared: str
    new: str


def split_messages(*, system: str, user: str, shared_chars: int) -> tuple[MessageSplit, MessageSplit]:
    """Return the system and the user message each cut where the first `shared_chars` of the prompt end.

    A shared part that ends inside the system message leaves the user message all new; one
    that ends inside the blank line between them leaves the system message all shared.
    """
    system_shared = min(shared_chars, len(system))
    user_shared = max(0, min(shared_chars - len(system) - len(SEPARATOR), len(user)))
    return (
        MessageSplit(shared=system[:system_shared], new=system[system_shared:]),
        MessageSplit(shared=user[:user_shared], new=user[user_shared:]),
    )

"""Cleaning the fields small models fill in: placeholders, "you", lists, wrong slots.

Shared by extraction, consolidation and reflection:

- `text_value` turns whatever a model put in a string slot (a list, a number, an object
  with a "name") into one string;
- `is_placeholder` recognises the non-values models write instead of leaving a field
  empty ("you", "your location", "the environment", "now", "the player", "someone",
  "unknown", "n/a"...); they never become entities, places or times;
- `second_person_to_name` rewrites second-person narration ("You hand Brann the key") as
  a sentence about the player character ("Wren Halloway hands Brann the key");
- `looks_temporal` / `looks_like_place` keep a place out of `when` and a time out of `where`;
- `statement_key` is the normalised form used to drop repeated facts and beliefs.
"""

from __future__ import annotations

import re
import unicodedata

_EMPTY = {
    "",
    "none",
    "null",
    "nil",
    "n/a",
    "na",
    "unknown",
    "unspecified",
    "not specified",
    "not stated",
    "not mentioned",
    "not given",
    "not applicable",
    "-",
    "--",
    "?",
    "...",
    "tbd",
    "empty",
    "nothing",
    "no",
}
# Who / entities / subject: the reader, the narrator and vague people are nobody in particular.
_PERSON = {
    "you",
    "your",
    "yours",
    "yourself",
    "you (the player)",
    "the player",
    "player",
    "the player character",
    "player character",
    "the protagonist",
    "protagonist",
    "the main character",
    "main character",
    "the narrator",
    "narrator",
    "the user",
    "user",
    "the reader",
    "reader",
    "i",
    "me",
    "myself",
    "we",
    "us",
    "someone",
    "somebody",
    "anyone",
    "anybody",
    "everyone",
    "everybody",
    "no one",
    "nobody",
    "noone",
    "people",
    "a person",
    "person",
    "the character",
    "character",
    "characters",
    "a character",
    "he",
    "she",
    "they",
    "it",
    "him",
    "her",
    "them",
    "his",
    "hers",
    "their",
    "its",
    "the environment",
    "environment",
    "the world",
    "world",
    "the scene",
    "scene",
    "the story",
    "story",
    "the narrative",
    "narrative",
    "the passage",
    "passage",
    "the text",
    "text",
    "the game",
    "game",
    "an unknown person",
    "unknown person",
    "a stranger",
    "stranger",
}
# Where: the reader's position and the scene are not places.
_PLACE = {
    "your location",
    "your current location",
    "your position",
    "you",
    "the location",
    "location",
    "current location",
    "the current location",
    "here",
    "there",
    "somewhere",
    "anywhere",
    "everywhere",
    "nowhere",
    "the environment",
    "environment",
    "the scene",
    "scene",
    "the area",
    "area",
    "nearby",
    "the surroundings",
    "surroundings",
    "the setting",
    "setting",
    "the place",
    "place",
    "the story",
    "the world",
    "world",
    "inside",
    "outside",
    "the player's location",
    "player's location",
    "unknown location",
}
# When: "now" is every turn; only a stated story time is a time.
_TIME = {
    "now",
    "right now",
    "just now",
    "currently",
    "current",
    "present",
    "the present",
    "at present",
    "at this moment",
    "this moment",
    "the moment",
    "at the moment",
    "today",
    "recently",
    "at the time",
    "at that time",
    "then",
    "the current time",
    "current time",
    "soon",
    "later",
    "always",
    "sometime",
    "at some point",
    "in the story",
    "during the story",
    "the environment",
    "the scene",
    "in the passage",
    "during the passage",
    "present time",
    "this turn",
    "the current turn",
    "current turn",
    "ongoing",
}
_FIELD_PLACEHOLDERS = {"who": _PERSON, "entity": _PERSON, "where": _PLACE, "when": _TIME}

_TEMPORAL_WORDS = re.compile(
    r"\b(dawn|dusk|morning|noon|midday|afternoon|evening|night|midnight|sunrise|sunset|twilight|day|days|"
    r"week|weeks|month|months|year|years|hour|hours|minute|minutes|season|spring|summer|autumn|fall|winter|"
    r"yesterday|tomorrow|tonight|ago|after|before|during|since|until|when|while|earlier|later|ebb|ebbs|"
    r"tide|tides|moon|turn|turns|bell|bells|watch|first|second|third|last|next|previous|eve|"
    r"monday|tuesday|wednesday|thursday|friday|saturday|sunday|january|february|march|april|may|june|"
    r"july|august|september|october|november|december|\d+)\b",
    re.IGNORECASE,
)
_LOCATIVE_START = re.compile(
    r"^(in|at|on|inside|outside|near|by|under|beneath|behind|beside|within|across)\s+(the\s+)?\S", re.I
)


def fold(text) -> str:
    """Return `text` casefolded, without diacritics and surrounding space ("Kaël" ~ "kael")."""
    decomposed = unicodedata.normalize("NFKD", str(text).strip())
    return "".join(c for c in decomposed if not unicodedata.combining(c)).casefold()


def text_value(value, *, joiner: str = ", ") -> str:
    """Return a model's value for a string field as one string (lists joined, objects named)."""
    if value is None or isinstance(value, bool):
        return ""
    if isinstance(value, str):
        return " ".join(value.split())
    if isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, dict):
        for key in ("name", "value", "text", "statement", "description"):
            if isinstance(value.get(key), (str, int, float)):
                return text_value(value[key])
        return joiner.join(t for t in (text_value(v) for v in value.values()) if t)
    if isinstance(value, (list, tuple)):
        parts: list[str] = []
        seen: set[str] = set()
        for item in value:
            text = text_value(item, joiner=joiner)
            if text and fold(text) not in seen:
                seen.add(fold(text))
                parts.append(text)
        return joiner.join(parts)
    return str(value).strip()


def is_placeholder(value: str, kind: str = "") -> bool:
    """Return True when `value` is a non-value ("unknown") or a placeholder for `kind`.

    kind: "who" / "entity" (people), "where" (places), "when" (times), or "" (only the
    universal empties).
    """
    key = fold(value).strip(" .,:;!\"'()[]")
    key = " ".join(key.split())
    if key in _EMPTY:
        return True
    table = _FIELD_PLACEHOLDERS.get(kind)
    if table is None:
        return False
    if key in table:
        return True
    if kind == "where" and re.match(
        r"^(your|the player'?s?)\s+(current\s+)?(location|position|surroundings|place)$", key
    ):
        return True
    return False


def split_names(value: str) -> list[str]:
    """Split a `who` value into names ("Kaël, Mirela and Brann" -> three)."""
    parts = re.split(r"\s*(?:,|;|&|\band\b|\bwith\b|/)\s*", value or "")
    return [p.strip(" .") for p in parts if p and p.strip(" .")]


def looks_temporal(value: str) -> bool:
    """Return True when `value` reads as a time ("at dawn", "Day 3", "after the storm")."""
    return bool(_TEMPORAL_WORDS.search(value or ""))


_FILLER = {"at", "in", "on", "the", "a", "an", "of", "during", "around", "about", "by", "this", "that", "early", "late"}


def is_time_only(value: str) -> bool:
    """Return True when every word of `value` is a time word or a number ("at dawn", "Day 3")."""
    words = [w for w in re.findall(r"\w+", fold(value)) if w not in _FILLER]
    return bool(words) and all(_TEMPORAL_WORDS.fullmatch(w) for w in words)


def looks_like_place(value: str) -> bool:
    """Return True when `value` reads as a location phrase ("in the kitchen", "at the docks")."""
    return bool(_LOCATIVE_START.match((value or "").strip())) and not looks_temporal(value)


def statement_key(statement: str) -> str:
    """Return the form two statements share when they say the same thing in the same words."""
    folded = fold(statement)
    folded = re.sub(r"[^\w\s]", " ", folded)
    words = [w for w in folded.split() if w not in ("the", "a", "an")]
    return " ".join(words)


# -- second person -> the player character -------------------------------------------------

_MODALS = {
    "can",
    "could",
    "will",
    "would",
    "shall",
    "should",
    "may",
    "might",
    "must",
    "cannot",
    "can't",
    "won't",
    "had",
}
_ADVERBS = {
    "also",
    "still",
    "just",
    "never",
    "always",
    "then",
    "now",
    "already",
    "finally",
    "quickly",
    "slowly",
    "carefully",
    "only",
    "even",
    "often",
    "again",
    "barely",
    "nearly",
    "almost",
    "soon",
    "once",
    "first",
}
_IRREGULAR = {"are": "is", "were": "was", "have": "has", "do": "does", "go": "goes", "'re": " is", "'ve": " has"}
_SUBJECT_BEFORE = {
    "and",
    "but",
    "or",
    "then",
    "when",
    "as",
    "if",
    "because",
    "that",
    "while",
    "so",
    "until",
    "after",
    "before",
    "once",
    "since",
    "where",
    "though",
    "although",
    "unless",
}


def _third_person(verb: str) -> str:
    lower = verb.lower()
    if lower in _IRREGULAR:
        return _IRREGULAR[lower]
    if lower in _MODALS or not lower.isalpha() or (lower.endswith("ed") and not lower.endswith("eed")):
        return verb
    if re.search(r"(s|sh|ch|x|z|o)$", lower):
        return verb + "es"
    if re.search(r"[^aeiou]y$", lower):
        return verb[:-1] + "ies"
    return verb + "s"


_YOU = re.compile(r"\b(you|your|yours|yourself)\b", re.IGNORECASE)


def second_person_to_name(text: str, name: str) -> str:
    """Rewrite "you" / "your" in `text` as `name` ("You hand Brann your key" -> "Wren hands Brann Wren's key").

    The verb after a subject "you" is put in the third person when it is a plain present-
    tense verb; past tenses and modals stay as they are.
    """
    if not text or not name or not _YOU.search(text):
        return text
    tokens = re.findall(r"\w+(?:'\w+)?|[^\w\s]|\s+", text)
    out: list[str] = []
    i = 0
    previous_word = ""
    while i < len(tokens):
        token = tokens[i]
        lower = token.lower()
        if lower in ("you", "your", "yours", "yourself", "you're", "you've", "you'll", "you'd"):
            if lower in ("your", "yours"):
                out.append(f"{name}'s")
            elif lower == "yourself":
                out.append(name)
            elif lower == "you're":
                out.append(f"{name} is")
            elif lower == "you've":
                out.append(f"{name} has")
            elif lower == "you'll":
                out.append(f"{name} will")
            elif lower == "you'd":
                out.append(f"{name} would")
            else:
                out.append(name)
                subject = previous_word == "" or previous_word in _SUBJECT_BEFORE or previous_word in '.!?;:,"'
                if subject:
                    # find the verb: skip whitespace and up to one adverb
                    j = i + 1
                    while j < len(tokens) and tokens[j].isspace():
                        j += 1
                    if j < len(tokens) and tokens[j].lower() in _ADVERBS:
                        k = j + 1
                        while k < len(tokens) and tokens[k].isspace():
                            k += 1
                        j = k
                    if j < len(tokens) and re.fullmatch(r"[a-z]+", tokens[j]):
                        out.extend(tokens[i + 1 : j])
                        out.append(_third_person(tokens[j]))
                        previous_word = tokens[j].lower()
                        i = j + 1
                        continue
            previous_word = lower
            i += 1
            continue
        out.append(token)
        if not token.isspace():
            previous_word = lower
        i += 1
    result = "".join(out)
    return result[:1].upper() + result[1:] if result else result


_LEADING_PRONOUN = re.compile(r"^(he|she|they|his|her|their)\b\s*", re.IGNORECASE)


def name_leading_pronoun(statement: str, name: str) -> str:
    """Replace a leading "She"/"Her"/... by `name` ("Her kettle is cold." -> "Hesper's kettle is cold.").

    Only the first word: a statement that opens on a pronoun is not self-contained, and
    the fact's single `who` says whom it means.
    """
    match = _LEADING_PRONOUN.match(statement or "")
    if not match or not name:
        return statement
    word = match.group(1).lower()
    replacement = f"{name}'s " if word in ("his", "her", "their") else f"{name} "
    rest = statement[match.end() :]
    if word == "her" and re.match(r"^(is|was|has|had|did|does|went|goes|will|would|can|could)\b", rest):
        replacement = f"{name} "  # "Her" used as a subject by a careless model
    return replacement + rest

"""A narration as sentences, each with who says or does it: the guard's reading of the text.

`read_narration(text, index)` splits a narration into sentences and gives each its
`speaker` (a character's canonical name, or "" for the narration itself) and `role`:

- **says**: the sentence holds words in quotes (“…” or "…", a quote may run over several
  sentences), or a speech verb follows its subject ("Corvin says Hesper has not…"). The
  speaker is the character named next to a speech verb outside the quotes ("…," Wren tells
  Pim: Wren), else the one character named outside them, else (a pronoun, or no attribution)
  the character who spoke or acted last;
- **acts**: no quote, and a character is its subject: named within the first words (after
  "Then", "At last," …), not as a possessive ("Kael's ship" is not Kael acting); a sentence
  opening with "He" / "She" / "They" is the last actor's;
- **says**, too: a sentence in the first person outside quotes, with no other speaker, when the
  player's input speaks to one character (`addressed_in`): a model answering in that
  character's voice ("Captain, have you heard…" — "I have heard…"), or a narration that opens
  with "Yes" / "No" to the addressed character's question, and the sentences after it that name
  no other speaker;
- **narration**: anything else.

Names are found by the one rule of names (`CharacterIndex.match`, `studio.memory.knowledge.names`):
a title or key anywhere (as `mentioned_in`), and a capitalised word or two that resolve to
exactly one character (a unique part of a title: "Mirela", "Tull"); a name two characters
share names neither. `arrives` marks a sentence in which its speaker comes on scene ("Kael
steps in", "Dace climbs aboard"). Pure: no database.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from studio.memory.knowledge.names import CharacterIndex, fold

__all__ = ["MOVES", "Sentence", "addressed_in", "names_in", "read_narration", "split_sentences"]

# A sentence ends at . ! ? or … (and any closing quotes or brackets after it), before a space.
_END = re.compile(r"(?<=[.!?…])\s+|(?<=[.!?…][\"'”’)\]])\s+|\s*\n\s*")
_QUOTE = re.compile(r"“[^”]*”?|\"[^\"]*\"?")
SPEECH_VERBS = frozenset(
    "say says said ask asks asked tell tells told whisper whispers whispered reply replies replied answer answers "
    "answered mutter mutters muttered murmur murmurs murmured shout shouts shouted call calls called add adds added "
    "admit admits admitted insist insists insisted explain explains explained confess confesses confessed warn "
    "warns warned hiss hisses hissed snap snaps snapped laugh laughs laughed sigh sighs sighed cry cries cried "
    "breathe breathes breathed growl growls growled agree agrees agreed begin begins began continue continues "
    "continued reveal reveals revealed mention mentions mentioned claim claims claimed".split()
)
# Verbs that carry words without quotes ("Corvin says Hesper has not…"); "laughs" or "sighs" do only beside a quote.
INDIRECT_SPEECH = frozenset(
    "say says said tell tells told whisper whispers whispered reply replies replied answer "
    "answers answered admit admits admitted confess confesses confessed reveal reveals revealed "
    "mention mentions mentioned claim claims claimed insist insists insisted explain explains "
    "explained warn warns warned ask asks asked".split()
)
ARRIVAL = re.compile(
    r"\b(enter|enters|entered|arrive|arrives|arrived|appear|appears|appeared|join|joins|joined|return|returns|returned"
    r"|(?:walk|walks|walked|step|steps|stepped|come|comes|came|climb|climbs|climbed|duck|ducks|ducked|push|pushes|"
    r"pushed|stride|strides|strode|slip|slips|slipped|burst|bursts|hurry|hurries|hurried|run|runs|ran|wade|wades|"
    r"waded|swim|swims|swam|row|rows|rowed)\s+(?:in|into|inside|aboard|up|over|through|back|out of|from))\b"
    r"|\b(?:is|are|was|were|stands|sits|waits|lies|crouches)\s+(?:there|here|inside|waiting)\b",
    re.IGNORECASE,
)
# Verbs of going somewhere, remembering or imagining: a place named beside one is not where the speaker is.
MOVES = re.compile(
    r"\b(go|goes|went|walk|walks|walked|head|heads|headed|sail|sails|sailed|row|rows|rowed|return|returns|"
    r"returned|leave|leaves|left|arrive|arrives|arrived|climb|climbs|climbed|swim|swims|swam|run|runs|ran|"
    r"travel|travels|come|comes|came|reach|reaches|reached|enter|enters|entered|remember|remembers|"
    r"remembered|dream|dreams|dreamed|think|thinks|thought|imagine|imagines|imagined)\b",
    re.IGNORECASE,
)
_LEAD_WORDS = frozenset(
    "then now suddenly at last finally slowly quietly still and but so when as meanwhile later "
    "outside inside here there once again soon behind him her them across the room".split()
)
_PRONOUNS = frozenset({"he", "she", "they", "his", "her", "their"})
_SUBJECT_WINDOW = 4  # a subject is named within the sentence's first words (after leading words)
_CAPITALISED = re.compile(r"\b[A-Z][\w'’-]*(?:\s+[A-Z][\w'’-]*){0,2}")


@dataclass(frozen=True)
class Sentence:
    index: int
    text: str
    speaker: str = ""  # canonical name of who says or does it; "" : the narration
    role: str = "narration"  # says | acts | narration
    how: str = ""  # how the speaker was found
    said: str = ""  # the words it carries from the speaker: the quotes when it has them, else the sentence
    named: tuple[str, ...] = ()  # the characters it names, in order
    arrives: bool = False

    def as_dict(self) -> dict:
        return {
            "index": self.index,
            "text": self.text,
            "speaker": self.speaker,
            "role": self.role,
            "how": self.how,
            "named": list(self.named),
            "arrives": self.arrives,
        }


def split_sentences(text: str) -> list[str]:
    """Return the sentences of `text` (paragraph breaks end one too), stripped, without blanks."""
    return [part.strip() for part in _END.split(text or "") if part and part.strip()]


@dataclass(frozen=True)
class _Name:
    start: int
    end: int
    title: str


def names_in(index: CharacterIndex, text: str) -> list[_Name]:
    """Return the characters `text` names, as spans in order: titles and keys anywhere, then capitalised words
    that resolve to one character by the names rule; the longest span wins, spans never overlap."""
    spans: list[_Name] = []
    for folded, title in index.characters.items():
        for match in re.finditer(rf"(?<!\w){re.escape(folded)}(?!\w)", text, flags=re.IGNORECASE):
            spans.append(_Name(match.start(), match.end(), title))
    for match in _CAPITALISED.finditer(text):
        words = match.group(0).split()
        for size in range(len(words), 0, -1):  # the longest run of capitalised words that names one character
            candidate = " ".join(words[:size]).strip("'’")
            found = index.match(candidate)
            if not found.title and size == 1:
                found = index.match("the " + candidate)  # "Captain," for the key "the Captain"
            if found.title:
                spans.append(_Name(match.start(), match.start() + len(candidate), found.title))
                break
    spans.sort(key=lambda s: (s.start, -(s.end - s.start)))
    kept: list[_Name] = []
    for span in spans:
        if kept and span.start < kept[-1].end:
            continue
        kept.append(span)
    return kept


def _outside_quotes(text: str) -> tuple[str, str]:
    """Return (the text with its quotes blanked, the quoted words joined)."""
    quoted = [m.group(0) for m in _QUOTE.finditer(text)]
    outside = _QUOTE.sub(lambda m: " " * len(m.group(0)), text)
    return outside, " ".join(q.strip('“”"') for q in quoted)


def _words_around(text: str, span: _Name) -> tuple[list[str], list[str]]:
    before = re.findall(r"[\w'’]+", text[: span.start].lower())
    after = re.findall(r"[\w'’]+", text[span.end :].lower())
    return before, after


def _is_possessive(text: str, span: _Name) -> bool:
    return (
        text[span.end : span.end + 2] in ("'s", "’s")
        or text[span.end : span.end + 1] in ("'", "’")
        and text[span.end - 1 : span.end] == "s"
    )


def _subject(text: str, names: list[_Name]) -> _Name | None:
    """The character named as the sentence's subject: within its first words, not a possessive."""
    for span in names:
        before, _after = _words_around(text, span)
        leading = [w for w in before if w not in _LEAD_WORDS]
        if len(before) <= _SUBJECT_WINDOW and not leading and not _is_possessive(text, span):
            return span
        break
    return None


def _speaker_of_quote(outside: str, names: list[_Name]) -> tuple[_Name | None, str]:
    """The character who says a quoted sentence: next to a speech verb, else the only one named outside the quotes."""
    for span in names:
        before, after = _words_around(outside, span)
        if (after[:1] and after[0] in SPEECH_VERBS) or (before[-1:] and before[-1] in SPEECH_VERBS):
            return span, "named beside a speech verb"
    if len({n.title for n in names}) == 1:
        return names[0], "the one character named outside the quotes"
    return None, ""


def _starts_with_pronoun(text: str) -> bool:
    first = re.findall(r"[\w'’]+", text.lower())[:1]
    return bool(first) and first[0] in _PRONOUNS


@dataclass
class _Reading:
    last: str = ""  # the character who spoke or acted last
    in_quote: bool = False  # a quote opened in an earlier sentence is still open
    quote_speaker: str = ""
    voice: str = ""  # the addressed character answering in the first person, outside quotes
    sentences: list[Sentence] = field(default_factory=list)


def addressed_in(player_input: str, index: CharacterIndex) -> str:
    """The character the player's input speaks to: named first, before a comma ("Lady Verrow, is Hesper…"), else
    the one character it names other than the player character; "" when it names none or several."""
    text = (player_input or "").strip()
    spans = names_in(index, text)
    if spans and spans[0].start == 0 and text[spans[0].end : spans[0].end + 1] == ",":
        return spans[0].title
    named = {n.title for n in spans} - {index.player}
    return next(iter(named)) if len(named) == 1 else ""


def read_narration(text: str, index: CharacterIndex, *, addressed: str = "") -> list[Sentence]:
    """Return the narration's sentences, each with who says or does it (the module's rules). `addressed`: the
    character the player's input speaks to (`addressed_in`): a sentence in the first person outside quotes with no
    other speaker is theirs (a model answering in the character's voice)."""
    state = _Reading()
    for number, sentence in enumerate(split_sentences(text)):
        state.sentences.append(_read_one(number, sentence, index, state, addressed))
    return state.sentences


_ANSWER = re.compile(r"^\W*(yes|no|aye|nay|nah|yeah)\b", re.IGNORECASE)
_FIRST_PERSON = re.compile(r"\b(I|I'm|I’m|I've|I’ve|I'd|I’d|I'll|I’ll|me|my|mine|myself)\b")


def _read_one(number: int, sentence: str, index: CharacterIndex, state: _Reading, addressed: str = "") -> Sentence:
    names = names_in(index, sentence)
    named = tuple(dict.fromkeys(n.title for n in names))
    outside, quoted = _outside_quotes(sentence)
    opens = sentence.count("“") > sentence.count("”") or (sentence.count('"') % 2 == 1 and not state.in_quote)
    closes = sentence.count("”") > sentence.count("“") or (sentence.count('"') % 2 == 1 and state.in_quote)
    continuing = state.in_quote
    has_quote = bool(quoted.strip()) or continuing
    outside_names = [n for n in names_in(index, outside)]
    speaker, role, how = "", "narration", ""
    if has_quote:
        role = "says"
        span, how = _speaker_of_quote(outside, outside_names)
        if span is not None:
            speaker = span.title
        elif continuing and state.quote_speaker:
            speaker, how = state.quote_speaker, "the quote goes on from the sentence before"
        elif state.last and (not outside_names or _starts_with_pronoun(outside.strip())):
            speaker, how = state.last, "the character who spoke or acted last"
        said = quoted if quoted.strip() else sentence
    else:
        span = _subject(sentence, names)
        said = sentence
        if span is not None:
            speaker = span.title
            _before, after = _words_around(sentence, span)
            role = "says" if after[:1] and after[0] in INDIRECT_SPEECH else "acts"
            how = "its subject"
        elif state.voice and not named:
            speaker, role, how = state.voice, "says", "goes on in the voice of the sentence before"
        elif _starts_with_pronoun(sentence) and state.last:
            speaker, role, how = state.last, "acts", "a pronoun for the character who acted last"
            _first, *rest = re.findall(r"[\w'’]+", sentence.lower())[:2] or [""]
            if rest and rest[0] in INDIRECT_SPEECH:
                role = "says"
        elif addressed and _FIRST_PERSON.search(sentence):
            speaker, role, how = (
                addressed,
                "says",
                "in the first person, answering for the character the player addressed",
            )
        elif addressed and not state.sentences and _ANSWER.search(sentence):
            speaker, role, how = addressed, "says", "answers the player's question (“yes”, “no”)"
        elif state.voice:
            speaker, role, how = state.voice, "says", "goes on in the voice of the sentence before"
    if (
        not has_quote
        and addressed
        and speaker == addressed
        and (_FIRST_PERSON.search(sentence) or (not state.sentences and _ANSWER.search(sentence)))
    ):
        state.voice = speaker
    elif has_quote or (speaker and speaker != state.voice):
        state.voice = ""
    if opens and not closes:
        state.in_quote, state.quote_speaker = True, speaker
    elif closes or (not opens and not continuing):
        state.in_quote, state.quote_speaker = (False, "") if closes else (state.in_quote, state.quote_speaker)
    if speaker:
        state.last = speaker
    elif named:
        state.last = named[0]
    arrives = bool(speaker) and bool(ARRIVAL.search(outside)) and fold(speaker) in {fold(n) for n in named}
    return Sentence(
        index=number,
        text=sentence,
        speaker=speaker,
        role=role,
        how=how,
        said=said.strip() or sentence,
        named=named,
        arrives=arrives,
    )

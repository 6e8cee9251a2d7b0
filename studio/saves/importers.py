"""Import a save from a transcript (JSON Lines of turns) or from a LoCoMo conversation.

Both importers parse and validate the whole file first and write nothing if any part is
wrong; the writes then run in one transaction, and the embedding jobs are queued on commit
(by the services they call), so a failed import leaves no half-made save behind.

Transcript format, one JSON object per line (blank lines ignored)::

    {"player_input": "I open the door.", "narrative": "The hinges scream...", "state": {...}}

`narrative` (alias `text`) is required; `player_input` (alias `input`) and `state` (an
object) are optional; each is checked as the API checks a turn (`studio/limits.py`, the
state's `present` and `reveals`); `turn_id`, when given, must increase by one from 1 (it is checked,
not trusted: turns are numbered by the save).

LoCoMo format: see `../shared/data/locomo/README.md`. One session is one turn (turn N =
session N, in session order); its narrative is the session's utterances as
"Speaker: text" lines, with "[image: caption]" appended when the utterance shared an
image; the session date is kept in the turn's state. Each utterance is also one memory
chunk carrying its `dia_id` (and session) in the chunk metadata, so a question's evidence
can be found by id; the turn's narrative is therefore not embedded a second time, and a
LoCoMo save is a classic-memory save (its chunks are written by the importer, not by the
per-turn jobs that living mode would need).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Iterable

from django.db import transaction

from studio import limits
from studio.memory.knowledge.presence import presence_state_errors
from studio.memory.knowledge.reveals import reveal_state_errors
from studio.world.models import Save, Universe

MAX_TURNS = 20_000
LOCOMO_CHUNK_TYPE = "narrative"


class ImportFormatError(ValueError):
    """The file is not in the expected format; `errors` lists every problem found."""

    def __init__(self, errors: list[str]):
        super().__init__("; ".join(errors[:5]) + (f" (and {len(errors) - 5} more)" if len(errors) > 5 else ""))
        self.errors = errors


@dataclass
class TranscriptTurn:
    narrative: str
    player_input: str = ""
    state: dict | None = None
    chunks: list[dict] = field(default_factory=list)  # LoCoMo: {"text", "metadata"} per utterance


@dataclass
class ImportResult:
    game_save: Save
    turns: int
    chunks: int = 0


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def parse_transcript(lines: Iterable[str | bytes]) -> list[TranscriptTurn]:
    """Parse JSON Lines of turns; raise ImportFormatError listing every bad line."""
    turns: list[TranscriptTurn] = []
    errors: list[str] = []
    for number, raw in enumerate(lines, start=1):
        if isinstance(raw, bytes):
            try:
                raw = raw.decode("utf-8")
            except UnicodeDecodeError:
                errors.append(f"line {number}: not UTF-8")
                continue
        line = raw.strip().lstrip("\ufeff")
        if not line:
            continue
        try:
            record = json.loads(line, **limits.strict_json_hooks())
        except json.JSONDecodeError as exc:
            errors.append(f"line {number}: not JSON ({exc.msg})")
            continue
        except ValueError as exc:  # a key twice, NaN / Infinity
            errors.append(f"line {number}: not JSON the studio keeps ({exc})")
            continue
        if not isinstance(record, dict):
            errors.append(f"line {number}: expected a JSON object")
            continue
        narrative = _text(record.get("narrative", record.get("text"))).strip()
        if not narrative:
            errors.append(f"line {number}: no narrative")
            continue
        player_input = record.get("player_input", record.get("input", ""))
        if player_input is not None and not isinstance(player_input, str):
            errors.append(f"line {number}: player_input must be a string")
            continue
        player_input = (player_input or "").strip()
        problems = [
            f"{field.label} {problem}"
            for field, value in ((limits.TURN_NARRATIVE, narrative), (limits.TURN_INPUT, player_input))
            if (problem := field.problem(value))
        ]
        state = record.get("state")
        if state is not None and not isinstance(state, dict):
            problems.append("state must be a JSON object")
        else:
            problems += presence_state_errors(state) + reveal_state_errors(state)
        if problems:
            errors.append(f"line {number}: {problems[0]}")
            continue
        expected = len(turns) + 1
        if "turn_id" in record and record["turn_id"] != expected:
            errors.append(f"line {number}: turn_id {record['turn_id']!r}, expected {expected}")
            continue
        turns.append(TranscriptTurn(narrative=narrative, player_input=player_input, state=state))
        if len(turns) > MAX_TURNS:
            errors.append(f"more than {MAX_TURNS} turns")
            break
    if errors:
        raise ImportFormatError(errors)
    if not turns:
        raise ImportFormatError(["the file holds no turns"])
    return turns


_SESSION_RE = re.compile(r"^session_(\d+)$")


def locomo_chunk_text(utterance: dict) -> str:
    """Return the chunk text of one LoCoMo utterance: "Speaker: text" plus its image caption."""
    text = f"{_text(utterance.get('speaker')).strip()}: {_text(utterance.get('text')).strip()}"
    caption = _text(utterance.get("blip_caption")).strip()
    if caption:
        text += f" [image: {caption}]"
    return text


def parse_locomo(data: Any) -> tuple[str, list[TranscriptTurn]]:
    """Parse one LoCoMo conversation; return a default save name and one turn per session.

    Accepts the conversation object itself or a sample wrapping it under "conversation"
    (as in `locomo10.json`).
    """
    if isinstance(data, dict) and isinstance(data.get("conversation"), dict):
        data = data["conversation"]
    if not isinstance(data, dict):
        raise ImportFormatError(["expected a JSON object with speaker_a, speaker_b and session_N lists"])
    sessions = sorted((int(m.group(1)), key) for key in data if (m := _SESSION_RE.match(str(key))))
    errors: list[str] = []
    turns: list[TranscriptTurn] = []
    for expected, (number, key) in enumerate(sessions, start=1):
        utterances = data[key]
        if number != expected:
            errors.append(f"{key}: sessions must be numbered 1, 2, 3…; expected session_{expected}")
            continue
        if not isinstance(utterances, list) or not utterances:
            errors.append(f"{key}: expected a non-empty list of utterances")
            continue
        chunks = []
        for index, utterance in enumerate(utterances, start=1):
            if (
                not isinstance(utterance, dict)
                or not _text(utterance.get("text")).strip()
                and not _text(utterance.get("blip_caption")).strip()
            ):
                errors.append(f"{key}[{index}]: an utterance needs a speaker and a text")
                continue
            metadata = {"session": number}
            dia_id = _text(utterance.get("dia_id")).strip()
            if dia_id:
                metadata["dia_id"] = dia_id
            chunks.append({"text": locomo_chunk_text(utterance), "metadata": metadata})
        date_time = _text(data.get(f"{key}_date_time")).strip()
        state = {"session": number}
        if date_time:
            state["date_time"] = date_time
        turn = TranscriptTurn(
            narrative="\n".join(c["text"] for c in chunks),
            player_input=f"Session {number}" + (f" ({date_time})" if date_time else ""),
            state=state,
            chunks=chunks,
        )
        problems = [
            f"{field.label} {problem}"
            for field, value in ((limits.TURN_NARRATIVE, turn.narrative), (limits.TURN_INPUT, turn.player_input))
            if (problem := field.problem(value))
        ]
        if problems:
            errors.append(f"{key}: its {problems[0]}")
            continue
        turns.append(turn)
    if not sessions:
        errors.append("no session_N lists found")
    if errors:
        raise ImportFormatError(errors)
    a, b = _text(data.get("speaker_a")).strip(), _text(data.get("speaker_b")).strip()
    name = " ".join(f"LoCoMo: {a} & {b}".split())[: limits.SAVE_NAME.max_chars] if a and b else "LoCoMo conversation"
    return name if not limits.SAVE_NAME.problem(name) else "LoCoMo conversation", turns


def import_transcript(
    *, universe: Universe, name: str, memory_mode: str, beliefs_enabled: bool, turns: list[TranscriptTurn]
) -> ImportResult:
    """Create a save and append every turn, all in one transaction; jobs are queued on commit."""
    from studio.saves.services import save_create, turn_append

    with transaction.atomic():
        game_save = save_create(universe=universe, name=name, memory_mode=memory_mode, beliefs_enabled=beliefs_enabled)
        for turn in turns:
            turn_append(game_save=game_save, player_input=turn.player_input, narrative=turn.narrative, state=turn.state)
    game_save.refresh_from_db()
    return ImportResult(game_save=game_save, turns=len(turns))


def import_locomo(*, universe: Universe, name: str, turns: list[TranscriptTurn], vector_memory=None) -> ImportResult:
    """Create a classic save from a parsed LoCoMo conversation: one turn per session.

    The turns are written in one transaction, then every utterance is embedded as its own
    chunk (batched), tagged with its `dia_id` and session. The turns do not go through the
    per-turn embedding job, which would embed each session's text a second time as one
    narrative. If the embedding fails the save is deleted again, so an import is all or
    nothing; when the embedding runtime is unavailable the turns are kept and
    `ImportResult.chunks` is 0.
    """
    from django.utils import timezone

    from studio.world.models import MemoryMode
    from studio.saves.services import save_create, turn_record

    with transaction.atomic():
        game_save = save_create(universe=universe, name=name, memory_mode=MemoryMode.CLASSIC, beliefs_enabled=False)
        locked = Save.objects.select_for_update().get(pk=game_save.pk)
        # Each turn through every per-turn table's append hook, as play writes it (no turn job: the
        # utterances are embedded below, one chunk each).
        for n, t in enumerate(turns, start=1):
            turn_record(save=locked, turn_id=n, player_input=t.player_input, narrative=t.narrative, state=t.state or {})
        now = timezone.now()
        Save.objects.filter(pk=game_save.pk).update(current_turn=len(turns), last_activity_at=now, updated_at=now)
    items = [
        {"turn_id": n, "text": chunk["text"], "chunk_type": LOCOMO_CHUNK_TYPE, "metadata_extra": chunk["metadata"]}
        for n, turn in enumerate(turns, start=1)
        for chunk in turn.chunks
    ]
    if vector_memory is None:
        from studio.memory.vector import get_vector_memory

        vector_memory = get_vector_memory()
    try:
        ids = vector_memory.embed_chunks(game_save.save_id, items)
    except Exception as exc:
        try:
            vector_memory.delete_save(game_save.save_id)
        finally:
            game_save.delete()
        raise ImportFormatError(
            [f"the memory store failed while embedding ({type(exc).__name__}: {exc}); nothing was imported"]
        ) from exc
    game_save.refresh_from_db()
    return ImportResult(game_save=game_save, turns=len(turns), chunks=sum(1 for i in ids if i))

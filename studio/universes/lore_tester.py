"""The key tester: which entries a pasted text would activate, and why (reads only).

Without a save the text is evaluated as the first turn of a new save (no history, no
sticky or cooldown, fixed seed). With a save and a turn N it is evaluated as turn N's
player input: the scan buffer holds the save's turns before N, the timed effects are the
ones recorded for N - 1, and the draws use the seed the play loop would use, so the tester
answers what would happen if the player typed this at that turn.

Each entry's explanation comes from the engine (`studio.memory.lore_activation.activate`);
nothing here re-implements a rule. A regex key that ran past its time limit counts as not
matching (as in play); the result lists the entries it happened to (`regex_timeouts`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from studio.memory.lore_activation import REGEX_TIMEOUT, activate, activation_seed, scan_messages
from studio.memory.lore.activation_state import activation_state_as_of, history_turns, lore_seed_for, universe_book
from studio.memory.recall.macros import macro_names
from studio.world.models import Event


MAX_TEXT_CHARS = 20_000
# Explanation codes that mean "the evaluation never got past the keys": listed only on request.
QUIET_CODES = frozenset({"no_match", "no_keys", "disabled"})


@dataclass
class TesterRow:
    entry_id: str
    title: str
    included: bool
    code: str
    reasons: list[str]
    matched_key: str = ""
    via_entry: str = ""
    group: str = ""
    rivals: list[str] = field(default_factory=list)
    roll: float | None = None
    threshold: float | None = None
    regex_timeouts: list[str] = field(default_factory=list)


@dataclass
class TesterResult:
    included: list[TesterRow]
    considered: list[TesterRow]  # looked at and left out (secondary logic, roll, group, cooldown...)
    quiet: int  # entries no key of which appears
    total: int
    turn: int
    save: object | None
    passes: int
    history: int  # past turns in the scan buffer
    elapsed_ms: float
    regex_timeouts: list[TesterRow] = field(default_factory=list)  # entries with a regex key past its time limit
    regex_timeout_ms: int = 0


def _row(explanation) -> TesterRow:
    return TesterRow(
        entry_id=explanation.entry_id,
        title=explanation.title,
        included=explanation.included,
        code=explanation.code,
        reasons=list(explanation.reasons),
        matched_key=explanation.matched_key,
        via_entry=explanation.via_entry,
        group=explanation.group,
        rivals=list(explanation.rivals),
        roll=explanation.roll,
        threshold=explanation.threshold,
        regex_timeouts=list(explanation.regex_timeouts),
    )


def lore_key_test(*, universe, text: str, save=None, turn: int | None = None, show_all: bool = False) -> TesterResult:
    """Evaluate the universe's book for `text` (as a new save's first turn, or turn `turn` of `save`)."""
    started = time.perf_counter()
    # {{user}} / {{char}} in keys: the names play fills them with (studio.memory.recall.macros).
    book = universe_book(universe, macros=macro_names(universe=universe, save=save).as_dict())
    text = (text or "")[:MAX_TEXT_CHARS]
    if save is None:
        turn, turns, state = 1, [], None
        seed = activation_seed(save_id=f"key-tester:{universe.pk}", generation=0, turn=1)
    else:
        turn = max(1, min(turn or save.current_turn + 1, save.current_turn + 1))
        turns = list(
            Event.objects.filter(game_save=save, turn_id__lt=turn)
            .order_by("-turn_id")
            .values_list("turn_id", "player_input", "narrative")[: history_turns(book)]
        )
        state = activation_state_as_of(save=save, turn_id=turn - 1)
        seed = lore_seed_for(save=save, turn_id=turn)
    result = activate(
        book=book, messages=scan_messages(pending_input=text, turns=turns), turn=turn, state=state, seed=seed
    )
    explanations = result.explanations
    included = [_row(explanations[spec.entry_id]) for spec in result.activated]
    considered, quiet = [], 0
    for entry_id in explanations:
        record = explanations[entry_id]
        if record.included:
            continue
        if record.code in QUIET_CODES and not show_all and not record.regex_timeouts:
            quiet += 1
            continue
        considered.append(_row(record))
    timeouts = [row for row in included + considered if row.regex_timeouts]
    return TesterResult(
        included=included,
        considered=considered,
        quiet=quiet,
        total=len(book.specs),
        turn=turn,
        save=save,
        passes=result.passes,
        history=len(turns),
        elapsed_ms=(time.perf_counter() - started) * 1000,
        regex_timeouts=timeouts,
        regex_timeout_ms=int(REGEX_TIMEOUT * 1000),
    )

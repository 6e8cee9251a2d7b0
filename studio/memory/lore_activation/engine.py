"""`activate`: evaluate a compiled book for one turn (world-info.js checkWorldInfo).

Order of one evaluation, one method of `_Evaluation` each:
1. `apply_timed_effects`: the sticky and cooldown windows of the previous state (and the
   cooldown a finished sticky starts);
2. `run_passes`: scan passes over the buffer (the first over the chat, the next ones over
   activated entries' text while recursion is on and the budget not overflowed, with
   delay-until-recursion levels). Each pass decides every candidate entry (`decide`: the
   per-entry rules, then `match_keys`), keeps one entry per inclusion group, and accepts
   entries through probability and the budget (`accept`);
3. `start_timed_effects`: new sticky / cooldown windows and first matches;
4. `note_regex_timeouts`: regex keys that ran past their time limit, on their entries.
"""

from __future__ import annotations

from collections.abc import Sequence

from studio.memory.lore_activation.explain import Explanations, Records
from studio.memory.lore_activation.groups import filter_groups
from studio.memory.lore_activation.matcher import CompiledBook, ScanBuffer
from studio.memory.lore_activation.regex_keys import (
    OUT_OF_BUDGET,
    REGEX_TIMEOUT,
    TIMED_OUT_BEFORE,
    RegexBudget,
)
from studio.memory.lore_activation.spec import (
    AND_ALL,
    AND_ANY,
    LOGIC_NAMES,
    MAX_SCAN_DEPTH,
    NOT_ALL,
    NOT_ANY,
    ActivationResult,
    Explanation,
    LoreSpec,
    LoreState,
    ScanMessage,
    TimedEffect,
    message_clock,
    seeded_rng,
    turn_of_clock,
    turns_left,
)

# Scan states (world-info.js scan_state).
_NONE, _INITIAL, _RECURSION = 0, 1, 2


def activate(
    *,
    book: CompiledBook,
    messages: Sequence[ScanMessage],
    turn: int,
    state: LoreState | None,
    seed: str,
    regex_budget: RegexBudget | None = None,
) -> ActivationResult:
    """Evaluate the book for `turn` (the turn being played) from the state left by the turn before.

    `messages` is the scan buffer newest first (see `scan_messages`); `state` is the state as
    of turn - 1 (None = a fresh save). Return the activated entries, the new state and an
    explanation for every entry. `regex_budget` bounds the time backtracking regex keys may
    take (default: a fresh `RegexBudget` of REGEX_BUDGET seconds for this evaluation); a key
    past it counts as not matching and is reported in `regex_timeouts`.
    """
    evaluation = _Evaluation(book, messages, turn, state, seed, regex_budget)
    evaluation.apply_timed_effects()
    evaluation.run_passes()
    evaluation.start_timed_effects()
    evaluation.note_regex_timeouts()
    return evaluation.result()


class _Evaluation:
    """The working state of one `activate` call."""

    def __init__(
        self,
        book: CompiledBook,
        messages: Sequence[ScanMessage],
        turn: int,
        state: LoreState | None,
        seed: str,
        regex_budget: RegexBudget | None = None,
    ):
        self.book, self.specs, self.defaults = book, book.specs, book.defaults
        self.turn, self.seed = turn, seed
        self.clock = message_clock(turn)
        self.previous = state or LoreState()
        self.explanations = Records(book)
        self.buffer = ScanBuffer(book, messages, regex_budget)
        self.new_state = LoreState(sticky={}, cooldown={}, first_matched=dict(self.previous.first_matched))
        self.sticky_now: set[int] = set()
        self.cooldown_now: set[int] = set()
        self.activated: dict[int, int] = {}  # entry index -> pass
        self.sequence: list[int] = []
        self.failed: set[int] = set()
        self.used_tokens = 0
        self.overflowed = False
        self.passes = 0
        self.assistant_messages = turn - 1  # narrations before this turn (CCv3 "assistant message count")

    # --- helpers ---------------------------------------------------------------------------

    def explain(self, index: int, code: str, reason: str, *, keep: bool = False, **extra) -> None:
        # keep=True adds to why the entry matched (a roll or the budget decided after the match).
        record = self.explanations[self.specs[index].entry_id]
        record.code = code
        record.reasons = [*record.reasons, reason] if keep else [reason]
        for name, value in extra.items():
            setattr(record, name, value)

    def depth_of(self, spec: LoreSpec) -> int:
        depth = spec.scan_depth if spec.scan_depth is not None else self.defaults.scan_depth
        return min(depth, MAX_SCAN_DEPTH)

    # --- 1. timed effects (world-info.js WorldInfoTimedEffects.checkTimedEffects) -----------

    def apply_timed_effects(self) -> None:
        book, clock, new_state = self.book, self.clock, self.new_state
        for kind, effects, target, active in (
            ("sticky", self.previous.sticky, new_state.sticky, self.sticky_now),
            ("cooldown", self.previous.cooldown, new_state.cooldown, self.cooldown_now),
        ):
            for entry_id, effect in effects.items():
                index = book.by_id.get(entry_id)
                if kind == "cooldown" and entry_id in new_state.cooldown:
                    continue  # replaced by the cooldown that the end of its sticky window started
                if clock <= effect.start and not effect.protected:
                    continue  # the chat did not advance
                if index is None or book.hashes[index] != effect.entry_hash:
                    if clock < effect.end:
                        target[entry_id] = effect  # another version of the entry: kept, not applied
                    continue
                spec = self.specs[index]
                if not getattr(spec, kind):
                    continue
                if clock >= effect.end:
                    if kind == "sticky" and spec.cooldown:
                        # Sticky ended: the cooldown starts now and already applies (onEnded.sticky).
                        new_state.cooldown[entry_id] = TimedEffect(
                            clock, clock + spec.cooldown, effect.entry_hash, True
                        )
                        self.cooldown_now.add(index)
                    continue
                target[entry_id] = effect
                active.add(index)

    # --- 2. scan passes ------------------------------------------------------------------------

    def run_passes(self) -> None:
        book = self.book
        recursive = self.defaults.recursion_depth > 0
        max_steps = self.defaults.recursion_depth + 1 if recursive else 0
        levels = list(book.delay_levels)
        self.current_level = levels.pop(0) if levels else 0
        scan_state = _INITIAL
        # The buffer only grows, so after the first pass only these can change their outcome:
        # entries with a key in the new recursion text, entries waiting for secondary or
        # additional keys, entries delayed until recursion, and regex entries (in book.always).
        fresh_needles: set[int] = set(self.buffer.first_seen)
        self.retry: set[int] = set()
        while scan_state:
            if max_steps and self.passes >= max_steps:
                break
            self.passes += 1
            candidates = set(book.always) | self.sticky_now | self.retry
            if self.passes > 1:
                candidates.update(book.delayed)
            for needle in fresh_needles:
                candidates.update(book.needle_entries.get(needle, ()))
            self.retry = set()
            activated_now = [
                index
                for index in sorted(candidates, key=book.rank_of.__getitem__)
                if index not in self.activated
                and index not in self.failed
                and self.specs[index].enabled
                and self.decide(index, scan_state, recursive)
            ]
            accepted = self.accept(activated_now)
            for_recursion = [i for i in accepted if not self.specs[i].prevent_recursion]
            next_state = _NONE
            if recursive and not self.overflowed and for_recursion:
                next_state = _RECURSION
            if next_state == _NONE and levels:
                next_state = _RECURSION
                self.current_level = levels.pop(0)
            scan_state = next_state
            fresh_needles = self.buffer.add_recursion(for_recursion) if scan_state else set()

    def decide(self, index: int, scan_state: int, recursive: bool) -> bool:
        """Apply the per-entry rules to an enabled candidate; True when it activates in this pass."""
        spec, turn = self.specs[index], self.turn
        sticky = index in self.sticky_now
        if spec.delay and self.clock < spec.delay:
            self.explain(
                index,
                "delay",
                f"delayed: the chat holds {self.clock} message(s) counting this turn's "
                f"input; the entry waits for {spec.delay}",
            )
            return False
        if index in self.cooldown_now and not sticky:
            effect = self.new_state.cooldown.get(spec.entry_id)
            until = turn_of_clock(effect.end - 1) + 1 if effect else turn
            self.explain(index, "cooldown", f"on cooldown until turn {until}")
            return False
        if spec.delay_until_recursion and not sticky:
            if scan_state != _RECURSION:
                self.explain(index, "delay_until_recursion", "waits for recursion (delay until recursion)")
                return False
            if spec.delay_until_recursion > self.current_level:
                self.explain(
                    index,
                    "delay_until_recursion",
                    f"waits for recursion level {spec.delay_until_recursion} (at level {self.current_level})",
                )
                return False
        if scan_state == _RECURSION and recursive and spec.exclude_recursion and not sticky:
            self.explain(index, "exclude_recursion", "not activated by other entries (exclude recursion)")
            return False
        if spec.forced == "activate":
            self.explain(index, "forced", "@@activate")
            return True
        if spec.forced == "dont_activate":
            self.explain(index, "forced_off", "@@dont_activate")
            return False
        matched_turn = self.previous.first_matched.get(spec.entry_id)
        if spec.after_first_match == "stop" and matched_turn is not None:
            self.explain(
                index, "after_first_match", f"already matched at turn {matched_turn} (@@dont_activate_after_match)"
            )
            return False
        if spec.after_first_match == "keep" and matched_turn is not None:
            self.explain(
                index,
                "after_first_match",
                f"matched at turn {matched_turn}; stays active (@@keep_activate_after_match)",
            )
            return True
        narrations = self.assistant_messages
        if spec.activate_only_after and narrations < spec.activate_only_after:
            self.explain(
                index,
                "activate_only_after",
                f"only after {spec.activate_only_after} narrations (@@activate_only_after); {narrations} so far",
            )
            return False
        if spec.activate_only_every and narrations % spec.activate_only_every:
            self.explain(
                index,
                "activate_only_every",
                f"only every {spec.activate_only_every} narrations (@@activate_only_every); {narrations} so far",
            )
            return False
        if spec.constant:
            self.explain(index, "constant", "constant")
            return True
        if sticky:
            effect = self.new_state.sticky[spec.entry_id]
            self.explain(
                index,
                "sticky",
                f"sticky since turn {turn_of_clock(effect.start)} "
                f"({turns_left(effect, turn)} more turn(s) after this one)",
            )
            return True
        return self.match_keys(index, spec)

    def match_keys(self, index: int, spec: LoreSpec) -> bool:
        """The key rules: a primary key, then secondary logic, @@additional_keys, @@exclude_keys."""
        book, buffer = self.book, self.buffer
        primary = book.primary[index]
        if not primary:
            self.explain(index, "no_keys", "has no keys")
            return False
        depth = self.depth_of(spec)
        hit = None
        for key in primary:
            where = buffer.locate(key, depth)
            if where is not None:
                hit = (key, where)
                break
        if hit is None:
            deeper = next(((k, w) for k in primary if (w := buffer.beyond_depth(k, depth))), None)
            if depth <= 0:
                self.explain(index, "no_match", "scan depth 0: keys are not scanned")
            elif deeper:
                self.explain(
                    index,
                    "beyond_scan_depth",
                    f"key “{deeper[0].raw}” appears only in {deeper[1]}, beyond the scan depth of {depth} message(s)",
                )
            else:
                self.explain(index, "no_match", f"no key matched in the last {depth} message(s)")
            return False
        key, where = hit
        via = ""
        if "(recursion)" in where:
            via = self.specs[buffer.recursion_seen[key.needle]].entry_id
        reasons = [f"matched key “{key.raw}” in {where}"]
        secondary = book.secondary[index]
        if spec.selective and secondary:
            found = [k.raw for k in secondary if buffer.locate(k, depth) is not None]
            logic = spec.selective_logic
            ok = {
                AND_ANY: bool(found),
                NOT_ALL: len(found) < len(secondary),
                NOT_ANY: not found,
                AND_ALL: len(found) == len(secondary),
            }.get(logic, bool(found))
            shown = ", ".join(f"“{k}”" for k in found) or "none"
            if not ok:
                if logic in (AND_ANY, AND_ALL):
                    self.retry.add(index)  # more text may bring the secondary keys
                self.explain(
                    index,
                    "secondary",
                    f"matched key “{key.raw}” in {where}, but secondary logic "
                    f"{LOGIC_NAMES.get(logic, logic)} failed (secondary keys present: {shown})",
                    matched_key=key.raw,
                    matched_in=where,
                )
                return False
            reasons.append(f"secondary logic {LOGIC_NAMES.get(logic, logic)} holds (present: {shown})")
        missing_group = next(
            (group for group in book.additional[index] if group and not any(buffer.locate(k, depth) for k in group)),
            None,
        )
        if missing_group is not None:
            self.retry.add(index)
            self.explain(
                index,
                "additional_keys",
                f"matched key “{key.raw}”, but none of the @@additional_keys "
                f"{', '.join(k.raw for k in missing_group)} appears",
                matched_key=key.raw,
                matched_in=where,
            )
            return False
        excluded = next((k for k in book.exclude[index] if buffer.locate(k, depth)), None)
        if excluded is not None:
            self.explain(
                index,
                "exclude_keys",
                f"matched key “{key.raw}”, but @@exclude_keys “{excluded.raw}” appears",
                matched_key=key.raw,
                matched_in=where,
            )
            return False
        record = self.explanations[spec.entry_id]
        record.code = "recursion" if via else "key"
        record.reasons = reasons
        record.matched_key, record.matched_in, record.via_entry = key.raw, where, via
        return True

    def accept(self, activated_now: list[int]) -> list[int]:
        """Order a pass's matches, keep one per group, then roll probability and apply the budget."""
        book, specs, sticky_now = self.book, self.specs, self.sticky_now
        # world-info.js: sticky first, then the book order.
        new_entries = sorted(activated_now, key=lambda i: (i not in sticky_now, book.rank_of[i]))
        new_entries = filter_groups(
            book,
            new_entries,
            self.activated,
            sticky_now,
            self.buffer,
            self.depth_of,
            self.seed,
            self.passes,
            self.explanations,
        )
        if any(specs[i].priority is not None for i in new_entries):
            new_entries.sort(
                key=lambda i: (
                    i not in sticky_now,
                    -(specs[i].priority if specs[i].priority is not None else specs[i].insertion_order),
                    book.rank_of[i],
                )
            )
        new_entries.sort(key=lambda i: specs[i].ignore_on_max_context)  # trimmed first when over budget
        budget = self.defaults.token_budget
        accepted: list[int] = []
        for index in new_entries:
            spec = specs[index]
            if spec.use_probability and spec.probability != 100 and index not in sticky_now:
                roll = seeded_rng(self.seed, "probability", spec.entry_id).random() * 100
                record = self.explanations[spec.entry_id]
                record.roll, record.threshold = round(roll, 3), spec.probability
                if not roll <= spec.probability:
                    self.failed.add(index)
                    self.explain(index, "probability", f"probability roll {roll:.1f} > {spec.probability}%", keep=True)
                    continue
                record.reasons.append(f"probability roll {roll:.1f} ≤ {spec.probability}%")
            if budget > 0 and not spec.ignore_budget:
                if self.overflowed or self.used_tokens + spec.token_count >= budget:
                    self.overflowed = True
                    self.explain(
                        index,
                        "budget",
                        f"left out: the lore budget of {budget} tokens is reached "
                        f"({self.used_tokens} used, this entry needs {spec.token_count})",
                        keep=True,
                    )
                    continue
                self.used_tokens += spec.token_count
            elif spec.ignore_budget and budget > 0:
                self.explanations[spec.entry_id].reasons.append("ignores the budget")
            self.activated[index] = self.passes
            self.sequence.append(index)
            accepted.append(index)
            record = self.explanations[spec.entry_id]
            record.included, record.pass_index = True, self.passes
        return accepted

    # --- 3. new timed effects (world-info.js setTimedEffects) ---------------------------------

    def start_timed_effects(self) -> None:
        new_state, clock = self.new_state, self.clock
        for index in self.sequence:
            spec = self.specs[index]
            if spec.sticky and spec.entry_id not in new_state.sticky:
                new_state.sticky[spec.entry_id] = TimedEffect(clock, clock + spec.sticky, self.book.hashes[index])
            if spec.cooldown and spec.entry_id not in new_state.cooldown:
                new_state.cooldown[spec.entry_id] = TimedEffect(clock, clock + spec.cooldown, self.book.hashes[index])
            if spec.after_first_match and spec.entry_id not in new_state.first_matched:
                new_state.first_matched[spec.entry_id] = self.turn

    # --- 4. regex keys past their time limit ----------------------------------------------------

    def note_regex_timeouts(self) -> None:
        timed_out, seconds = self.buffer.timed_out, self.buffer.budget.seconds
        if not timed_out:
            return
        for index, refs in self.book.regex_refs.items():
            late = [ref for ref in refs if ref.regex.source in timed_out]
            if late:
                record = self.explanations[self.specs[index].entry_id]
                record.regex_timeouts = [ref.raw for ref in late]
                record.reasons = [
                    *record.reasons,
                    *(_timeout_reason(ref.raw, timed_out[ref.regex.source], seconds) for ref in late),
                ]

    # --- the result ----------------------------------------------------------------------------

    def untouched(self, index: int) -> Explanation:
        """Why an entry the evaluation never looked at is out (built when someone asks)."""
        spec, book = self.specs[index], self.book
        record = Explanation(spec.entry_id, spec.title)
        depth = self.depth_of(spec)
        if not spec.enabled:
            record.code, record.reasons = "disabled", ["disabled"]
        elif spec.entry_id in self.cooldown_ids:
            record.code, record.reasons = "cooldown", ["on cooldown"]
        elif spec.delay and self.clock < spec.delay:
            record.code, record.reasons = "delay", [f"delayed until the chat has {spec.delay} messages"]
        elif not book.primary[index]:
            record.code, record.reasons = "no_keys", ["has no keys"]
        elif depth <= 0:
            record.reasons = ["scan depth 0: keys are not scanned"]
        else:
            deeper = next(
                (
                    (k, w)
                    for k in book.primary[index]
                    if k.needle in self.seen_needles and (w := self.buffer.beyond_depth(k, depth))
                ),
                None,
            )
            if deeper:
                record.code = "beyond_scan_depth"
                record.reasons = [
                    (f"key “{deeper[0].raw}” appears only in {deeper[1]}, beyond the scan depth of {depth} message(s)")
                ]
            else:
                record.reasons = [f"no key matched in the last {depth} message(s)"]
        return record

    def result(self) -> ActivationResult:
        specs = self.specs
        self.cooldown_ids = {specs[i].entry_id for i in self.cooldown_now}
        self.seen_needles = set(self.buffer.first_seen)
        prompt_order = sorted(self.sequence, key=lambda i: (specs[i].insertion_order, specs[i].entry_id))
        return ActivationResult(
            activated=[specs[i] for i in prompt_order],
            sequence=[specs[i].entry_id for i in self.sequence],
            state=self.new_state,
            explanations=Explanations(self.book, self.explanations.records, self.untouched),
            passes=self.passes,
            turn=self.turn,
            regex_timeouts=sorted(self.buffer.timed_out),
        )


def _timeout_reason(raw: str, why: str, seconds: float) -> str:
    if why == OUT_OF_BUDGET:
        return (
            f"regex key “{raw}” was not run to the end: the {seconds:g} s allowed to slow regex keys "
            f"was spent; it counts as not matching"
        )
    if why == TIMED_OUT_BEFORE:
        return (
            f"regex key “{raw}” ran past its {int(REGEX_TIMEOUT * 1000)} ms limit earlier in this replay "
            f"and counts as not matching"
        )
    return f"regex key “{raw}” ran past its {int(REGEX_TIMEOUT * 1000)} ms limit and counts as not matching"

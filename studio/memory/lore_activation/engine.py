"""`activate`: evaluate a compiled book for one turn (world-info.js checkWorldInfo).

Order of one evaluation: timed effects from the previous state (sticky, cooldown, the
cooldown a finished sticky starts), then scan passes over the buffer (the first over the
chat, the next ones over activated entries' text while recursion is on and the budget not
overflowed, with delay-until-recursion levels), each pass applying the per-entry rules,
inclusion groups, probability and the budget; then new timed effects start.
"""
from __future__ import annotations

from collections.abc import Sequence

from studio.memory.lore_activation.explain import Explanations, Records
from studio.memory.lore_activation.groups import filter_groups
from studio.memory.lore_activation.matcher import CompiledBook, ScanBuffer
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


def activate(*, book: CompiledBook, messages: Sequence[ScanMessage], turn: int, state: LoreState | None,
             seed: str) -> ActivationResult:
    """Evaluate the book for `turn` (the turn being played) from the state left by the turn before.

    `messages` is the scan buffer newest first (see `scan_messages`); `state` is the state as
    of turn - 1 (None = a fresh save). Return the activated entries, the new state and an
    explanation for every entry.
    """
    specs, defaults = book.specs, book.defaults
    clock = message_clock(turn)
    previous = state or LoreState()
    explanations = Records(book)
    buffer = ScanBuffer(book, messages)

    # Timed effects (world-info.js WorldInfoTimedEffects.checkTimedEffects).
    new_state = LoreState(sticky={}, cooldown={}, first_matched=dict(previous.first_matched))
    sticky_now: set[int] = set()
    cooldown_now: set[int] = set()
    for kind, effects, target, active in (("sticky", previous.sticky, new_state.sticky, sticky_now),
                                          ("cooldown", previous.cooldown, new_state.cooldown, cooldown_now)):
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
            spec = specs[index]
            if not getattr(spec, kind):
                continue
            if clock >= effect.end:
                if kind == "sticky" and spec.cooldown:
                    # Sticky ended: the cooldown starts now and already applies (onEnded.sticky).
                    new_state.cooldown[entry_id] = TimedEffect(clock, clock + spec.cooldown, effect.entry_hash, True)
                    cooldown_now.add(index)
                continue
            target[entry_id] = effect
            active.add(index)

    recursive = defaults.recursion_depth > 0
    max_steps = defaults.recursion_depth + 1 if recursive else 0
    levels = list(book.delay_levels)
    current_level = levels.pop(0) if levels else 0
    activated: dict[int, int] = {}  # entry index -> pass
    sequence: list[int] = []
    failed: set[int] = set()
    budget = defaults.token_budget
    used_tokens = 0
    overflowed = False
    scan_state, count = _INITIAL, 0
    assistant_messages = turn - 1  # narrations before this turn (CCv3 "assistant message count")

    def explain(index: int, code: str, reason: str, *, keep: bool = False, **extra) -> None:
        # keep=True adds to why the entry matched (a roll or the budget decided after the match).
        record = explanations[specs[index].entry_id]
        record.code = code
        record.reasons = [*record.reasons, reason] if keep else [reason]
        for name, value in extra.items():
            setattr(record, name, value)

    def depth_of(spec: LoreSpec) -> int:
        depth = spec.scan_depth if spec.scan_depth is not None else defaults.scan_depth
        return min(depth, MAX_SCAN_DEPTH)

    # The buffer only grows, so after the first pass only these can change their outcome:
    # entries with a key in the new recursion text, entries waiting for secondary or
    # additional keys, entries delayed until recursion, and regex entries (in book.always).
    fresh_needles: set[int] = set(buffer.first_seen)
    retry: set[int] = set()
    while scan_state:
        if max_steps and count >= max_steps:
            break
        count += 1
        candidates = set(book.always) | sticky_now | retry
        if count > 1:
            candidates.update(book.delayed)
        for needle in fresh_needles:
            candidates.update(book.needle_entries.get(needle, ()))
        retry = set()
        activated_now: list[int] = []
        for index in sorted(candidates, key=book.rank_of.__getitem__):
            if index in activated or index in failed:
                continue
            spec = specs[index]
            if not spec.enabled:
                continue
            sticky = index in sticky_now
            if spec.delay and clock < spec.delay:
                explain(index, "delay", f"delayed: the chat has {clock - 1} messages before this turn's input, "
                        f"the entry waits for {spec.delay}")
                continue
            if index in cooldown_now and not sticky:
                effect = new_state.cooldown.get(spec.entry_id)
                until = turn_of_clock(effect.end - 1) + 1 if effect else turn
                explain(index, "cooldown", f"on cooldown until turn {until}")
                continue
            if spec.delay_until_recursion and not sticky:
                if scan_state != _RECURSION:
                    explain(index, "delay_until_recursion", "waits for recursion (delay until recursion)")
                    continue
                if spec.delay_until_recursion > current_level:
                    explain(index, "delay_until_recursion",
                            f"waits for recursion level {spec.delay_until_recursion} (at level {current_level})")
                    continue
            if scan_state == _RECURSION and recursive and spec.exclude_recursion and not sticky:
                explain(index, "exclude_recursion", "not activated by other entries (exclude recursion)")
                continue
            if spec.forced == "activate":
                explain(index, "forced", "@@activate")
                activated_now.append(index)
                continue
            if spec.forced == "dont_activate":
                explain(index, "forced_off", "@@dont_activate")
                continue
            matched_turn = previous.first_matched.get(spec.entry_id)
            if spec.after_first_match == "stop" and matched_turn is not None:
                explain(index, "after_first_match", f"already matched at turn {matched_turn} (@@dont_activate_after_match)")
                continue
            if spec.after_first_match == "keep" and matched_turn is not None:
                explain(index, "after_first_match", f"matched at turn {matched_turn}; stays active (@@keep_activate_after_match)")
                activated_now.append(index)
                continue
            if spec.activate_only_after and assistant_messages < spec.activate_only_after:
                explain(index, "activate_only_after", f"only after {spec.activate_only_after} narrations "
                        f"(@@activate_only_after); {assistant_messages} so far")
                continue
            if spec.activate_only_every and assistant_messages % spec.activate_only_every:
                explain(index, "activate_only_every", f"only every {spec.activate_only_every} narrations "
                        f"(@@activate_only_every); {assistant_messages} so far")
                continue
            if spec.constant:
                explain(index, "constant", "constant")
                activated_now.append(index)
                continue
            if sticky:
                effect = new_state.sticky[spec.entry_id]
                explain(index, "sticky", f"sticky since turn {turn_of_clock(effect.start)} "
                        f"({turns_left(effect, turn)} more turn(s) after this one)")
                activated_now.append(index)
                continue
            primary = book.primary[index]
            if not primary:
                explain(index, "no_keys", "has no keys")
                continue
            depth = depth_of(spec)
            hit = None
            for key in primary:
                where = buffer.locate(key, depth)
                if where is not None:
                    hit = (key, where)
                    break
            if hit is None:
                deeper = next(((k, w) for k in primary if (w := buffer.beyond_depth(k, depth))), None)
                if depth <= 0:
                    explain(index, "no_match", "scan depth 0: keys are not scanned")
                elif deeper:
                    explain(index, "beyond_scan_depth", f"key “{deeper[0].raw}” appears only in {deeper[1]}, "
                            f"beyond the scan depth of {depth} message(s)")
                else:
                    explain(index, "no_match", f"no key matched in the last {depth} message(s)")
                continue
            key, where = hit
            via = ""
            if "(recursion)" in where:
                via = specs[buffer.recursion_seen[key.needle]].entry_id
            reasons = [f"matched key “{key.raw}” in {where}"]
            secondary = book.secondary[index]
            if spec.selective and secondary:
                found = [k.raw for k in secondary if buffer.locate(k, depth) is not None]
                logic = spec.selective_logic
                ok = {AND_ANY: bool(found), NOT_ALL: len(found) < len(secondary), NOT_ANY: not found,
                      AND_ALL: len(found) == len(secondary)}.get(logic, bool(found))
                shown = ", ".join(f"“{k}”" for k in found) or "none"
                if not ok:
                    if logic in (AND_ANY, AND_ALL):
                        retry.add(index)  # more text may bring the secondary keys
                    explain(index, "secondary", f"matched key “{key.raw}” in {where}, but secondary logic "
                            f"{LOGIC_NAMES.get(logic, logic)} failed (secondary keys present: {shown})",
                            matched_key=key.raw, matched_in=where)
                    continue
                reasons.append(f"secondary logic {LOGIC_NAMES.get(logic, logic)} holds (present: {shown})")
            missing_group = next((group for group in book.additional[index]
                                  if group and not any(buffer.locate(k, depth) for k in group)), None)
            if missing_group is not None:
                retry.add(index)
                explain(index, "additional_keys", f"matched key “{key.raw}”, but none of the @@additional_keys "
                        f"{', '.join(k.raw for k in missing_group)} appears", matched_key=key.raw, matched_in=where)
                continue
            excluded = next((k for k in book.exclude[index] if buffer.locate(k, depth)), None)
            if excluded is not None:
                explain(index, "exclude_keys", f"matched key “{key.raw}”, but @@exclude_keys “{excluded.raw}” appears",
                        matched_key=key.raw, matched_in=where)
                continue
            record = explanations[spec.entry_id]
            record.code = "recursion" if via else "key"
            record.reasons = reasons
            record.matched_key, record.matched_in, record.via_entry = key.raw, where, via
            activated_now.append(index)

        # world-info.js: sticky first, then the book order.
        new_entries = sorted(activated_now, key=lambda i: (i not in sticky_now, book.rank_of[i]))
        new_entries = filter_groups(book, new_entries, activated, sticky_now, buffer, depth_of, seed, count,
                                     explanations)

        if any(specs[i].priority is not None for i in new_entries):
            new_entries.sort(key=lambda i: (i not in sticky_now, -(specs[i].priority if specs[i].priority is not None
                                                                     else specs[i].insertion_order), book.rank_of[i]))
        new_entries.sort(key=lambda i: specs[i].ignore_on_max_context)  # trimmed first when over budget
        accepted: list[int] = []
        for index in new_entries:
            spec = specs[index]
            if spec.use_probability and spec.probability != 100 and index not in sticky_now:
                roll = seeded_rng(seed, "probability", spec.entry_id).random() * 100
                record = explanations[spec.entry_id]
                record.roll, record.threshold = round(roll, 3), spec.probability
                if not roll <= spec.probability:
                    failed.add(index)
                    explain(index, "probability", f"probability roll {roll:.1f} > {spec.probability}%", keep=True)
                    continue
                record.reasons.append(f"probability roll {roll:.1f} ≤ {spec.probability}%")
            if budget > 0 and not spec.ignore_budget:
                if overflowed or used_tokens + spec.token_count >= budget:
                    overflowed = True
                    explain(index, "budget", f"left out: the lore budget of {budget} tokens is reached "
                            f"({used_tokens} used, this entry needs {spec.token_count})", keep=True)
                    continue
                used_tokens += spec.token_count
            elif spec.ignore_budget and budget > 0:
                explanations[spec.entry_id].reasons.append("ignores the budget")
            activated[index] = count
            sequence.append(index)
            accepted.append(index)
            record = explanations[spec.entry_id]
            record.included, record.pass_index = True, count

        for_recursion = [i for i in accepted if not specs[i].prevent_recursion]
        next_state = _NONE
        if recursive and not overflowed and for_recursion:
            next_state = _RECURSION
        if next_state == _NONE and levels:
            next_state = _RECURSION
            current_level = levels.pop(0)
        scan_state = next_state
        fresh_needles = buffer.add_recursion(for_recursion) if scan_state else set()

    # Timed effects start for what activated (world-info.js setTimedEffects).
    for index in sequence:
        spec = specs[index]
        if spec.sticky and spec.entry_id not in new_state.sticky:
            new_state.sticky[spec.entry_id] = TimedEffect(clock, clock + spec.sticky, book.hashes[index])
        if spec.cooldown and spec.entry_id not in new_state.cooldown:
            new_state.cooldown[spec.entry_id] = TimedEffect(clock, clock + spec.cooldown, book.hashes[index])
        if spec.after_first_match and spec.entry_id not in new_state.first_matched:
            new_state.first_matched[spec.entry_id] = turn

    cooldown_ids = {specs[i].entry_id for i in cooldown_now}
    seen_needles = set(buffer.first_seen)

    def untouched(index: int) -> Explanation:
        """Why an entry the evaluation never looked at is out (built when someone asks)."""
        spec = specs[index]
        record = Explanation(spec.entry_id, spec.title)
        depth = depth_of(spec)
        if not spec.enabled:
            record.code, record.reasons = "disabled", ["disabled"]
        elif spec.entry_id in cooldown_ids:
            record.code, record.reasons = "cooldown", ["on cooldown"]
        elif spec.delay and clock < spec.delay:
            record.code, record.reasons = "delay", [f"delayed until the chat has {spec.delay} messages"]
        elif not book.primary[index]:
            record.code, record.reasons = "no_keys", ["has no keys"]
        elif depth <= 0:
            record.reasons = ["scan depth 0: keys are not scanned"]
        else:
            deeper = next(((k, w) for k in book.primary[index] if k.needle in seen_needles
                           and (w := buffer.beyond_depth(k, depth))), None)
            if deeper:
                record.code = "beyond_scan_depth"
                record.reasons = [f"key “{deeper[0].raw}” appears only in {deeper[1]}, beyond the scan depth of "
                                  f"{depth} message(s)"]
            else:
                record.reasons = [f"no key matched in the last {depth} message(s)"]
        return record

    prompt_order = sorted(sequence, key=lambda i: (specs[i].insertion_order, specs[i].entry_id))
    return ActivationResult(
        activated=[specs[i] for i in prompt_order], sequence=[specs[i].entry_id for i in sequence],
        state=new_state, explanations=Explanations(book, explanations.records, untouched), passes=count, turn=turn,
    )

"""Inclusion groups: one winner per group (world-info.js filterByInclusionGroups).

A sticky member wins its group; with group scoring the members with the most matching keys
stay; a group won in an earlier pass stays won; then the prioritised member with the
highest order wins, else a weighted draw seeded like every other roll.
"""

from __future__ import annotations

from collections.abc import Mapping

from studio.memory.lore_activation.matcher import CompiledBook, ScanBuffer
from studio.memory.lore_activation.spec import AND_ALL, AND_ANY, seeded_rng


def filter_groups(
    book: CompiledBook,
    new_entries: list[int],
    activated: Mapping[int, int],
    sticky_now: set[int],
    buffer: ScanBuffer,
    depth_of,
    seed: str,
    pass_index: int,
    explanations,
) -> list[int]:
    """Keep one entry per inclusion group (world-info.js filterByInclusionGroups)."""
    specs = book.specs
    grouped: dict[str, list[int]] = {}
    for index in new_entries:
        for group in book.groups[index]:
            grouped.setdefault(group, []).append(index)
    if not grouped:
        return new_entries
    won_earlier: dict[str, list[int]] = {}
    for index in activated:
        for group in book.groups[index]:
            if group in grouped:
                won_earlier.setdefault(group, []).append(index)
    removed: set[int] = set()

    def lose(index: int, group: str, reason: str, rivals: list[int]) -> None:
        if index in removed:
            return
        removed.add(index)
        record = explanations[specs[index].entry_id]
        record.code = "group"
        record.reasons.append(reason)
        record.group, record.rivals = group, [specs[r].entry_id for r in rivals]

    has_sticky: dict[str, bool] = {}
    for group, members in grouped.items():
        stickies = [m for m in members if m in sticky_now]
        has_sticky[group] = bool(stickies)
        for m in members:
            if stickies and m not in stickies:
                lose(m, group, f"lost inclusion group “{group}” to sticky “{specs[stickies[0]].title}”", stickies)
    scoring_default = book.defaults.group_scoring
    for group, members in grouped.items():
        live = [m for m in members if m not in removed]
        if has_sticky[group] or not (scoring_default or any(specs[m].group_scoring for m in live)):
            continue
        scores = {m: group_score(book, m, buffer, depth_of(specs[m])) for m in live}
        best = max(scores.values(), default=0)
        for m in live:
            scored = specs[m].group_scoring if specs[m].group_scoring is not None else scoring_default
            if scored and scores[m] < best:
                winners = [w for w in live if scores[w] == best]
                lose(m, group, f"lost inclusion group “{group}” on key score ({scores[m]} < {best})", winners)
    for group, members in grouped.items():
        live = [m for m in members if m not in removed]
        if has_sticky[group]:
            continue
        earlier = won_earlier.get(group, [])
        if earlier:
            for m in live:
                lose(m, group, f"lost inclusion group “{group}”: “{specs[earlier[0]].title}” already won it", earlier)
            continue
        if len(live) <= 1:
            continue
        prioritized = sorted((m for m in live if specs[m].group_prioritize), key=lambda m: -specs[m].insertion_order)
        if prioritized:
            winner = prioritized[0]
            how = f"won inclusion group “{group}” by priority (highest order {specs[winner].insertion_order})"
        else:
            total = sum(specs[m].group_weight for m in live)
            roll = seeded_rng(seed, "group", group, pass_index).random() * total
            cumulative, winner = 0, None
            for m in live:
                cumulative += specs[m].group_weight
                if roll <= cumulative:
                    winner = m
                    break
            if winner is None:
                continue
            how = (
                f"won inclusion group “{group}” by weighted draw ({roll:.1f} of {total}, "
                f"weight {specs[winner].group_weight})"
            )
        rivals = [m for m in live if m != winner]
        for m in rivals:
            lose(m, group, f"lost inclusion group “{group}” to “{specs[winner].title}”", [winner])
        record = explanations[specs[winner].entry_id]
        record.reasons.append(how + " against " + ", ".join(f"“{specs[r].title}”" for r in rivals))
        record.group, record.rivals = group, [specs[r].entry_id for r in rivals]
    return [i for i in new_entries if i not in removed]


def group_score(book: CompiledBook, index: int, buffer: ScanBuffer, depth: int) -> int:
    """Count matching keys (world-info.js WorldInfoBuffer.getScore)."""
    spec = book.specs[index]
    primary = sum(1 for k in book.primary[index] if buffer.locate(k, depth))
    if not book.primary[index]:
        return 0
    secondary_keys = book.secondary[index]
    if secondary_keys:
        secondary = sum(1 for k in secondary_keys if buffer.locate(k, depth))
        if spec.selective_logic == AND_ANY:
            return primary + secondary
        if spec.selective_logic == AND_ALL:
            return primary + secondary if secondary == len(secondary_keys) else primary
    return primary

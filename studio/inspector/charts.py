"""Small server-rendered SVG charts for the memory inspector (no JavaScript chart library).

`evidence_chart` draws a belief's evidence over turns: one bar per turn (or per bin of
turns on a long save) counting the source facts from that turn, a step line with the
cumulative proof count, the recent and older windows `compute_trend` reads (so the trend
badge can be checked by eye), and a marker for each CREATE / UPDATE / DELETE of its
history. Every text that reaches the markup is escaped; the SVG uses presentation
attributes and classes only (the studio's CSP forbids inline styles).
"""
from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass

from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

from studio.memory.observations import compute_trend

RECENT_TURNS = 15
OLD_TURNS = 45
MAX_BARS = 60


@dataclass
class EvidenceChart:
    svg: SafeString
    bins: list[tuple[int, int, int]]  # (first turn, last turn, source count)
    cumulative: list[tuple[int, int]]  # (turn, proof count after that turn)
    trend: str
    first_turn: int
    last_turn: int
    bin_width: int


def _nice_ticks(lo: int, hi: int, count: int = 6) -> list[int]:
    span = max(hi - lo, 1)
    raw = span / count
    magnitude = 10 ** math.floor(math.log10(raw)) if raw >= 1 else 1
    step = next((m * magnitude for m in (1, 2, 5, 10) if m * magnitude >= raw), 10 * magnitude)
    step = max(int(step), 1)
    first = int(math.ceil(lo / step) * step)
    return list(range(first, hi + 1, step))


def evidence_chart(
    *, source_turns: list[int], history: list[dict], now_turn: int, width: int = 680, height: int = 200
) -> EvidenceChart:
    """Return the evidence-over-turns chart of one belief, as SVG markup and its data."""
    turns = sorted(int(t) for t in source_turns if t is not None and int(t) <= now_turn)
    history_turns = [int(h.get("turn_id") or 0) for h in history or []]
    known = turns + [t for t in history_turns if t <= now_turn]
    first = max(min(known) - 1, 0) if known else max(now_turn - OLD_TURNS, 0)
    first = min(first, max(now_turn - OLD_TURNS, 0))  # always show both trend windows
    last = max(now_turn, first + 1)
    span = last - first + 1
    bin_width = max(1, math.ceil(span / MAX_BARS))
    per_turn = Counter(turns)
    bins: list[tuple[int, int, int]] = []
    start = first
    while start <= last:
        end = min(start + bin_width - 1, last)
        bins.append((start, end, sum(per_turn[t] for t in range(start, end + 1))))
        start = end + 1
    cumulative: list[tuple[int, int]] = []
    running = 0
    for t in range(first, last + 1):
        running += per_turn[t]
        if not cumulative or cumulative[-1][1] != running or t == last:
            cumulative.append((t, running))
    trend = compute_trend(turns, now_turn, recent_turns=RECENT_TURNS, old_turns=OLD_TURNS)

    left, right, top, bottom = 36, 44, 16, 28
    plot_w = width - left - right
    plot_h = height - top - bottom
    max_bar = max((b[2] for b in bins), default=0) or 1
    max_total = max(len(turns), 1)
    # Bars use the lower part of the plot, so the cumulative line above them stays legible.
    bar_h = plot_h * 0.6

    def x_of(turn: float) -> float:
        return left + (turn - first) / span * plot_w

    def y_bar(n: int) -> float:
        return top + plot_h - n / max_bar * bar_h

    def y_total(n: int) -> float:
        return top + plot_h - n / max_total * plot_h

    parts: list[str] = []
    title = f"Evidence over turns: {len(turns)} source fact{'s' if len(turns) != 1 else ''}, trend {trend.upper()} at turn {now_turn}"
    parts.append(
        f'<svg xmlns="http://www.w3.org/2000/svg" class="chart evidence-chart" viewBox="0 0 {width} {height}" '
        f'width="{width}" height="{height}" role="img" aria-labelledby="evidence-title evidence-desc">'
    )
    parts.append(f'<title id="evidence-title">{escape(title)}</title>')
    desc = "; ".join(f"turn {a}{'' if a == b else f'-{b}'}: {n}" for a, b, n in bins if n) or "no sources"
    parts.append(f'<desc id="evidence-desc">Source facts per turn: {escape(desc)}</desc>')
    # The windows compute_trend reads: the recent one and the older one behind it.
    old_lo = max(now_turn - OLD_TURNS, first - 0.5)
    recent_lo = max(now_turn - RECENT_TURNS, first - 0.5)
    parts.append(
        f'<rect class="window-old" x="{x_of(old_lo + 0.5):.1f}" y="{top}" '
        f'width="{max(x_of(recent_lo + 0.5) - x_of(old_lo + 0.5), 0):.1f}" height="{plot_h}" fill="#f3f4f8"/>'
    )
    parts.append(
        f'<rect class="window-recent" x="{x_of(recent_lo + 0.5):.1f}" y="{top}" '
        f'width="{max(x_of(now_turn + 1) - x_of(recent_lo + 0.5), 0):.1f}" height="{plot_h}" fill="#e8edff"/>'
    )
    parts.append(
        f'<text class="window-label" x="{x_of(recent_lo + 0.5) + 3:.1f}" y="{top - 4}" '
        f'font-size="10" fill="#4a55a2">recent ({RECENT_TURNS} turns)</text>'
    )
    if x_of(recent_lo + 0.5) - x_of(old_lo + 0.5) > 60:
        parts.append(
            f'<text class="window-label" x="{x_of(old_lo + 0.5) + 3:.1f}" y="{top - 4}" '
            f'font-size="10" fill="#687085">older</text>'
        )
    # Axes and ticks.
    parts.append(
        f'<line x1="{left}" y1="{top + plot_h}" x2="{left + plot_w}" y2="{top + plot_h}" stroke="#9aa0b0"/>'
        f'<line x1="{left}" y1="{top}" x2="{left}" y2="{top + plot_h}" stroke="#9aa0b0"/>'
    )
    for tick in _nice_ticks(first, last):
        x = x_of(tick + 0.5)
        parts.append(
            f'<line x1="{x:.1f}" y1="{top + plot_h}" x2="{x:.1f}" y2="{top + plot_h + 4}" stroke="#9aa0b0"/>'
            f'<text x="{x:.1f}" y="{height - 10}" text-anchor="middle" font-size="10" fill="#687085">{tick}</text>'
        )
    parts.append(
        f'<text x="{left - 6}" y="{y_bar(max_bar) + 4:.1f}" text-anchor="end" font-size="10" fill="#3d5afe">{max_bar}</text>'
        f'<text x="{left - 6}" y="{top + plot_h}" text-anchor="end" font-size="10" fill="#687085">0</text>'
        f'<text x="{left + plot_w / 2:.1f}" y="{height - 0.5}" text-anchor="middle" font-size="10" fill="#687085">turn</text>'
    )
    # Bars: source facts per turn (or bin).
    bar_w = plot_w / len(bins)
    for index, (a, b, n) in enumerate(bins):
        if not n:
            continue
        x = left + index * bar_w
        y = y_bar(n)
        label = f"turn {a}" if a == b else f"turns {a}-{b}"
        parts.append(
            f'<rect class="bar" data-turn="{a}" data-count="{n}" x="{x + 1:.1f}" y="{y:.1f}" '
            f'width="{max(bar_w - 2, 1):.1f}" height="{top + plot_h - y:.1f}" fill="#8c9eff">'
            f"<title>{escape(label)}: {n} source fact{'s' if n != 1 else ''}</title></rect>"
        )
    # Cumulative proof count as a step line (own scale: 0..total).
    if turns:
        points = []
        previous_y = y_total(0)
        for t, total in cumulative:
            x = x_of(t)
            points.append(f"{x:.1f},{previous_y:.1f}")
            previous_y = y_total(total)
            points.append(f"{x:.1f},{previous_y:.1f}")
        points.append(f"{x_of(last + 1):.1f},{previous_y:.1f}")
        parts.append(
            f'<polyline class="cumulative" points="{" ".join(points)}" fill="none" stroke="#1b873f" stroke-width="2">'
            f"<title>proof count over turns (now {len(turns)})</title></polyline>"
        )
        parts.append(
            f'<text x="{left + plot_w + 4}" y="{previous_y + 4:.1f}" font-size="10" fill="#1b873f">'
            f"{len(turns)} proof{'s' if len(turns) != 1 else ''}</text>"
        )
    # History markers.
    colours = {"CREATE": "#23308f", "UPDATE": "#b26a00", "DELETE": "#c62828"}
    for entry in history or []:
        turn = int(entry.get("turn_id") or 0)
        if turn < first or turn > last:
            continue
        action = str(entry.get("action", "")).upper()
        x = x_of(turn + 0.5)
        statement = str(entry.get("statement", ""))[:160]
        parts.append(
            f'<g class="history-marker" data-action="{escape(action)}" data-turn="{turn}">'
            f'<path d="M{x - 5:.1f},{top + plot_h + 10} L{x + 5:.1f},{top + plot_h + 10} L{x:.1f},{top + plot_h + 2} Z" '
            f'fill="{colours.get(action, "#687085")}"/>'
            f"<title>{escape(action)} at turn {turn}: {escape(statement)}</title></g>"
        )
    parts.append("</svg>")
    return EvidenceChart(
        svg=mark_safe("".join(parts)),  # noqa: S308 - every interpolated text above is escaped
        bins=bins,
        cumulative=cumulative,
        trend=trend,
        first_turn=first,
        last_turn=last,
        bin_width=bin_width,
    )

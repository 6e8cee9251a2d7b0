"""Small server-rendered SVG charts for the memory inspector (no JavaScript chart library).

`evidence_chart` draws a belief's evidence over turns: one bar per turn (or per bin of
turns on a long save) counting the source facts from that turn, a step line with the
cumulative proof count, the recent and older windows `compute_trend` reads (so the trend
badge can be checked by eye), and a marker for each CREATE / UPDATE / DELETE of its
history. The numbers (bins, windows, coordinates as the markup prints them) are computed
here; the markup is the `evidence-svg` partial of `memory/belief_detail.html`, so Django's
autoescaping covers every text that reaches it. The SVG uses presentation attributes and
classes only (the studio's CSP forbids inline styles).
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass

from django.template.loader import render_to_string
from django.utils.safestring import SafeString

from studio.memory.observations import compute_trend
from studio.plural import counted

RECENT_TURNS = 15
OLD_TURNS = 45
MAX_BARS = 60


CHART_TEMPLATE = "memory/belief_detail.html#evidence-svg"
HISTORY_COLOURS = {"CREATE": "#23308f", "UPDATE": "#b26a00", "DELETE": "#c62828"}
OTHER_COLOUR = "#687085"


@dataclass
class EvidenceChart:
    layout: dict  # what the template draws: sizes, windows, ticks, bars, line, markers
    bins: list[tuple[int, int, int]]  # (first turn, last turn, source count)
    cumulative: list[tuple[int, int]]  # (turn, proof count after that turn)
    trend: str
    first_turn: int
    last_turn: int
    bin_width: int

    @property
    def svg(self) -> SafeString:
        """The chart as SVG markup (the template's partial rendered with `layout`)."""
        return render_to_string(CHART_TEMPLATE, {"layout": self.layout})


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

    layout = _layout(
        turns=turns,
        history=history or [],
        bins=bins,
        cumulative=cumulative,
        trend=trend,
        now_turn=now_turn,
        first=first,
        last=last,
        span=span,
        width=width,
        height=height,
    )
    return EvidenceChart(
        layout=layout,
        bins=bins,
        cumulative=cumulative,
        trend=trend,
        first_turn=first,
        last_turn=last,
        bin_width=bin_width,
    )


def _f(value: float) -> str:
    """A coordinate as the markup prints it (one decimal)."""
    return f"{value:.1f}"


def _layout(
    *,
    turns: list[int],
    history: list[dict],
    bins: list[tuple[int, int, int]],
    cumulative: list[tuple[int, int]],
    trend: str,
    now_turn: int,
    first: int,
    last: int,
    span: int,
    width: int,
    height: int,
) -> dict:
    """Return everything the chart template draws, coordinates already formatted."""
    left, right, top, bottom = 36, 44, 16, 28
    plot_w = width - left - right
    plot_h = height - top - bottom
    base = top + plot_h  # the x axis
    max_bar = max((b[2] for b in bins), default=0) or 1
    max_total = max(len(turns), 1)
    # Bars use the lower part of the plot, so the cumulative line above them stays legible.
    bar_h = plot_h * 0.6

    def x_of(turn: float) -> float:
        return left + (turn - first) / span * plot_w

    def y_bar(n: int) -> float:
        return base - n / max_bar * bar_h

    def y_total(n: int) -> float:
        return base - n / max_total * plot_h

    # The windows compute_trend reads: the recent one and the older one behind it.
    old_x = x_of(max(now_turn - OLD_TURNS, first - 0.5) + 0.5)
    recent_x = x_of(max(now_turn - RECENT_TURNS, first - 0.5) + 0.5)
    desc = "; ".join(f"turn {a}{'' if a == b else f'-{b}'}: {n}" for a, b, n in bins if n) or "no sources"

    bar_w = plot_w / len(bins)
    bars = []
    for index, (a, b, n) in enumerate(bins):
        if n:
            y = y_bar(n)
            bars.append(
                {
                    "turn": a,
                    "count": n,
                    "x": _f(left + index * bar_w + 1),
                    "y": _f(y),
                    "width": _f(max(bar_w - 2, 1)),
                    "height": _f(base - y),
                    "title": f"{f'turn {a}' if a == b else f'turns {a}-{b}'}: {counted(n, 'source fact')}",
                }
            )

    line = None
    if turns:
        points = []
        previous_y = y_total(0)
        for t, total in cumulative:
            x = x_of(t)
            points.append(f"{_f(x)},{_f(previous_y)}")
            previous_y = y_total(total)
            points.append(f"{_f(x)},{_f(previous_y)}")
        points.append(f"{_f(x_of(last + 1))},{_f(previous_y)}")
        line = {
            "points": " ".join(points),
            "total": len(turns),
            "label_x": left + plot_w + 4,
            "label_y": _f(previous_y + 4),
            "label": counted(len(turns), "proof"),
        }

    markers = []
    for entry in history:
        turn = int(entry.get("turn_id") or 0)
        if first <= turn <= last:
            action = str(entry.get("action", "")).upper()
            x = x_of(turn + 0.5)
            markers.append(
                {
                    "action": action,
                    "turn": turn,
                    "fill": HISTORY_COLOURS.get(action, OTHER_COLOUR),
                    "path": f"M{_f(x - 5)},{base + 10} L{_f(x + 5)},{base + 10} L{_f(x)},{base + 2} Z",
                    "statement": str(entry.get("statement", ""))[:160],
                }
            )

    return {
        "width": width,
        "height": height,
        "left": left,
        "top": top,
        "right_x": left + plot_w,
        "base": base,
        "plot_h": plot_h,
        "title": f"Evidence over turns: {counted(len(turns), 'source fact')}, trend {trend.upper()} at turn {now_turn}",
        "desc": desc,
        "old": {
            "x": _f(old_x),
            "width": _f(max(recent_x - old_x, 0)),
            "label_x": _f(old_x + 3),
            "labelled": recent_x - old_x > 60,
        },
        "recent": {
            "x": _f(recent_x),
            "width": _f(max(x_of(now_turn + 1) - recent_x, 0)),
            "label_x": _f(recent_x + 3),
            "turns": RECENT_TURNS,
        },
        "label_y": top - 4,
        "ticks": [{"x": _f(x_of(tick + 0.5)), "label": tick} for tick in _nice_ticks(first, last)],
        "tick_end": base + 4,
        "tick_label_y": height - 10,
        "axis_label_x": left - 6,
        "max_bar": max_bar,
        "max_bar_y": _f(y_bar(max_bar) + 4),
        "turn_label_x": _f(left + plot_w / 2),
        "turn_label_y": height - 0.5,
        "bars": bars,
        "line": line,
        "markers": markers,
    }

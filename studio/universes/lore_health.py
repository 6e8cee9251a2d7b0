"""Lore health: what a Lore Book does over recorded play, and what in it cannot work (reads only).

Two kinds of finding:
- from the book alone: regex keys that do not compile, regex keys known to be catastrophic
  (saved before the studio refused them), keys shared by several entries,
  entries larger than their share of the lore budget, links to entries that no longer
  exist (a deleted target, or an imported link naming an id the book never had), and
  pending links (written to an entry not written yet; they resolve when it is);
- from play: the chosen save's turns (or every save's) replayed through the activation
  engine with today's book, turn by turn exactly as the play loop evaluates them (the
  state chained from turn to turn, the play loop's seeds): entries that never activated,
  the keys that activate entries on the most turns, each entry's cost (its tokens
  times the turns it was in the prompt), and the regex keys that ran past their time limit
  (on how many turns: each such turn counted the key as not matching). The replay shares one
  `RegexBudget` of REPLAY_REGEX_BUDGET seconds between all its turns: a key that ran past its
  limit once is not searched again (later turns count it as not matching, and still report
  it), and once the budget is spent no slow regex key runs for the rest of the replay
  (`regex_budget_spent` says so), so the page answers well within the server's timeout.

Cost: the book is compiled once (cached per book version); each turn's messages are scanned
once by the book's automaton and then come from its message cache as the scan window moves
on, so a replay is one `activate()` per turn, not one regex per entry per turn.
`bench/lore_health.py` measures it beside the naive loop.
"""

from __future__ import annotations

import time
from collections import Counter, defaultdict, deque
from dataclasses import dataclass, field

from studio.memory.lore_activation import (
    REGEX_TIMEOUT,
    RegexBudget,
    activate,
    defaults_from_meta,
    key_errors,
    key_hazards,
    scan_messages,
)
from studio.memory.lore.activation_state import history_turns, lore_seed_for, universe_book
from studio.memory.recall.context_lore import context_budget_from_meta
from studio.memory.recall.macros import macro_names
from studio.world.models import Event


DEFAULT_SHARE = 50  # percent of the lore budget one entry may take before it is flagged
TOP = 25
REPLAY_REGEX_BUDGET = 5.0  # seconds of slow (backtracking) regex search a whole replay may spend


@dataclass
class HealthReport:
    entries: int
    saves: list = field(default_factory=list)
    turns: int = 0
    never_activated: list[dict] = field(default_factory=list)
    busy_keys: list[dict] = field(default_factory=list)
    shared_keys: list[dict] = field(default_factory=list)
    bad_regex: list[dict] = field(default_factory=list)
    slow_regex: list[dict] = field(default_factory=list)  # catastrophic shapes, refused at save today
    regex_timeouts: list[dict] = field(default_factory=list)  # keys past their time limit in the replay
    regex_timeout_ms: int = int(REGEX_TIMEOUT * 1000)
    regex_budget_s: float = REPLAY_REGEX_BUDGET
    regex_budget_spent: bool = False  # slow regex keys stopped running part-way through the replay
    oversized: list[dict] = field(default_factory=list)
    missing_links: list[dict] = field(default_factory=list)
    pending_links: list[dict] = field(default_factory=list)
    costs: list[dict] = field(default_factory=list)
    total_cost: int = 0
    budget: int = 0
    budget_from_meta: bool = False
    share: int = DEFAULT_SHARE
    disabled: int = 0
    elapsed_ms: float = 0.0

    @property
    def regex_problems(self) -> int:
        return len(self.slow_regex) + len(self.regex_timeouts)


def _static_findings(report: HealthReport, universe, book) -> None:
    by_key: dict[str, list] = defaultdict(list)
    for spec in book.specs:
        for key in spec.keys:
            if not (key.startswith("/") and key.count("/") >= 2):
                by_key[key.strip().casefold()].append(spec)
        for group_name, keys in (
            ("key", spec.keys),
            ("secondary key", spec.secondary_keys),
            ("exclude key", spec.exclude_keys),
            ("additional key", [k for group in spec.additional_keys for k in group]),
        ):
            for key in keys:
                for message in key_errors([key]):
                    report.bad_regex.append(
                        {
                            "entry_id": spec.entry_id,
                            "title": spec.title,
                            "key": key,
                            "where": group_name,
                            "message": message,
                        }
                    )
                for message in key_hazards([key]):
                    report.slow_regex.append(
                        {
                            "entry_id": spec.entry_id,
                            "title": spec.title,
                            "key": key,
                            "where": group_name,
                            "message": message,
                        }
                    )
        if spec.token_count * 100 > report.budget * report.share and not spec.ignore_budget:
            report.oversized.append({"entry_id": spec.entry_id, "title": spec.title, "tokens": spec.token_count})
    report.shared_keys = sorted(
        (
            {"key": key, "entries": [{"entry_id": s.entry_id, "title": s.title} for s in specs]}
            for key, specs in by_key.items()
            if key and len({s.entry_id for s in specs}) > 1
        ),
        key=lambda row: (-len(row["entries"]), row["key"]),
    )
    report.oversized.sort(key=lambda row: -row["tokens"])
    report.disabled = sum(1 for spec in book.specs if not spec.enabled)
    _missing_links(report, universe, book)
    report.pending_links = [
        {"entry_id": entry_id, "title": title, "name": name}
        for entry_id, title, name in universe.pending_lore_links.order_by("source__title", "name_key").values_list(
            "source__entry_id", "source__title", "name"
        )
    ]


def _missing_links(report: HealthReport, universe, book) -> None:
    present = set(book.by_id)
    titles = {spec.entry_id: spec.title for spec in book.specs}
    seen = set()
    deletions = (
        universe.lore_revisions.filter(action="delete")
        .exclude(entry_id__in=present)
        .order_by("-created_at")
        .values_list("entry_id", "before", "created_at")
    )
    for target, before, when in deletions:
        for source in (before or {}).get("backlinks") or []:
            if source in present and (source, target) not in seen:
                seen.add((source, target))
                report.missing_links.append(
                    {
                        "entry_id": source,
                        "title": titles[source],
                        "target": target,
                        "why": f"deleted on {when:%Y-%m-%d}",
                        "target_title": (before or {}).get("title", target),
                    }
                )
    for entry_id, extensions in universe.lore_entries.values_list("entry_id", "extensions"):
        axiom = (extensions or {}).get("axiom") if isinstance(extensions, dict) else None
        for target in (axiom or {}).get("links") or [] if isinstance(axiom, dict) else []:
            target = str(target)
            if target not in present and (entry_id, target) not in seen:
                seen.add((entry_id, target))
                report.missing_links.append(
                    {
                        "entry_id": entry_id,
                        "title": titles.get(entry_id, entry_id),
                        "target": target,
                        "why": "named by the imported file, never in this book",
                        "target_title": target,
                    }
                )


def _replay(report: HealthReport, book, saves, budget: RegexBudget) -> tuple[Counter, Counter, Counter]:
    """Replay each save's turns through the engine; count activations, activating keys and regex timeouts.

    `budget` is shared by every turn: a key past its limit is tried once, slow keys stop when it is spent.
    """
    activations: Counter = Counter()
    key_turns: Counter = Counter()
    timeouts: Counter = Counter()  # (entry index, key) -> turns its search ran past the limit
    window = history_turns(book)
    for save in saves:
        history: deque = deque(maxlen=window)
        state = None
        events = (
            Event.objects.filter(game_save=save).order_by("turn_id").values_list("turn_id", "player_input", "narrative")
        )
        for turn_id, player_input, narrative in events.iterator(chunk_size=500):
            result = activate(
                book=book,
                messages=scan_messages(pending_input=player_input, turns=list(history)),
                turn=turn_id,
                state=state,
                seed=lore_seed_for(save=save, turn_id=turn_id),
                regex_budget=budget,
            )
            state = result.state
            explanations = result.explanations
            for spec in result.activated:
                activations[spec.entry_id] += 1
                key = explanations[spec.entry_id].matched_key
                if key:
                    key_turns[(spec.entry_id, key)] += 1
            if result.regex_timeouts:
                late = set(result.regex_timeouts)
                for index, refs in book.regex_refs.items():
                    for ref in refs:
                        if ref.regex.source in late:
                            timeouts[(index, ref.raw)] += 1
            # The turn's own input and narration join the buffer for the next turn.
            history.appendleft((turn_id, player_input, narrative))
            report.turns += 1
    return activations, key_turns, timeouts


def lore_health(*, universe, saves=(), share: int = DEFAULT_SHARE) -> HealthReport:
    """Check the book and replay `saves` (an iterable of Save rows of this universe) through it."""
    started = time.perf_counter()
    universe_meta = universe.meta_values()  # the macros, the book's defaults, the budget
    # {{user}} / {{char}} in keys as play fills them (studio.memory.recall.macros; the universe's meta).
    macros = macro_names(universe=universe, universe_meta=universe_meta).as_dict()
    book = universe_book(universe, defaults=defaults_from_meta(universe_meta), macros=macros)
    report = HealthReport(entries=len(book.specs), saves=list(saves), share=share, regex_budget_s=REPLAY_REGEX_BUDGET)
    report.budget_from_meta = book.defaults.token_budget > 0
    # Without a lore budget, the narrator's memory context budget (the universe's `context_budget`, else 2,000).
    report.budget = book.defaults.token_budget if report.budget_from_meta else context_budget_from_meta(universe_meta)
    _static_findings(report, universe, book)
    if report.saves:
        budget = RegexBudget(report.regex_budget_s)
        activations, key_turns, timeouts = _replay(report, book, report.saves, budget)
        report.regex_budget_spent = budget.remaining <= 0
        report.regex_timeouts = [
            {"entry_id": book.specs[index].entry_id, "title": book.specs[index].title, "key": key, "turns": count}
            for (index, key), count in sorted(timeouts.items(), key=lambda item: (-item[1], item[0]))
        ]
        report.never_activated = [
            {"entry_id": s.entry_id, "title": s.title, "constant": s.constant}
            for s in book.specs
            if s.enabled and not activations[s.entry_id]
        ]
        report.busy_keys = [
            {
                "entry_id": entry_id,
                "title": book.specs[book.by_id[entry_id]].title,
                "key": key,
                "turns": count,
                "percent": round(100 * count / report.turns),
            }
            for (entry_id, key), count in key_turns.most_common(TOP)
        ]
        costs = []
        for spec in book.specs:
            count = activations[spec.entry_id]
            if count:
                costs.append(
                    {
                        "entry_id": spec.entry_id,
                        "title": spec.title,
                        "tokens": spec.token_count,
                        "activations": count,
                        "cost": spec.token_count * count,
                    }
                )
        costs.sort(key=lambda row: (-row["cost"], row["entry_id"]))
        report.total_cost = sum(row["cost"] for row in costs)
        report.costs = costs
    report.elapsed_ms = (time.perf_counter() - started) * 1000
    return report

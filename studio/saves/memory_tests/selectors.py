"""Reads of recorded memory-test results: as they stood at a turn, and the turns that have some."""

from __future__ import annotations

from django.db.models import Count, Max, Q

from studio.saves.memory_tests.models import FAILING, MemoryTestResult

__all__ = ["results_as_of", "result_turns"]


def results_as_of(*, game_save, turn: int | None = None) -> tuple[int | None, list[MemoryTestResult]]:
    """Return the latest run's results at or before `turn` (default: the save's current turn), and the turn
    they were recorded at (None, [] when no run is recorded by then). After a rewind to N these are the
    results as they stood at N: the later ones went with the turns."""
    horizon = game_save.current_turn if turn is None else min(turn, game_save.current_turn)
    rows = MemoryTestResult.objects.filter(game_save=game_save, turn_id__lte=horizon)
    last = rows.aggregate(last=Max("turn_id"))["last"]
    if last is None:
        return None, []
    return last, list(rows.filter(turn_id=last).order_by("name"))


def result_turns(*, game_save) -> list[dict]:
    """Return the turns with recorded results, newest first: {turn_id, tests, failed}."""
    return list(
        MemoryTestResult.objects.filter(game_save=game_save, turn_id__lte=game_save.current_turn)
        .values("turn_id")
        .annotate(tests=Count("id"), failed=Count("id", filter=Q(verdict__in=FAILING)))
        .order_by("-turn_id")
    )

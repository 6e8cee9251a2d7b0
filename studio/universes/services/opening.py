"""Writes for a universe's opening: first message, alternate greetings, scenario (`universes/opening.py`)."""

from __future__ import annotations

import json

from django.core.exceptions import ValidationError
from django.db import transaction

from studio.world.models import Universe, UniverseMeta
from studio.universes.opening import (
    ALTERNATE_GREETINGS_META,
    FIRST_MESSAGE_META,
    SCENARIO_META,
    Opening,
    opening_from_meta,
    opening_problems,
)


def opening_of(*, universe: Universe) -> Opening:
    """Return the universe's opening as stored (not the card's greetings)."""
    return opening_from_meta(universe.meta_values())


def opening_set(*, universe: Universe, first_message: str, alternate_greetings: list[str], scenario: str) -> Opening:
    """Store the opening (an empty field removes its key); raise ValidationError naming each problem, nothing written."""
    first_message = (first_message or "").strip()
    alternate_greetings = [g.strip() for g in alternate_greetings or [] if g and g.strip()]
    scenario = (scenario or "").strip()
    problems = opening_problems(first_message=first_message, alternate_greetings=alternate_greetings, scenario=scenario)
    if problems:
        raise ValidationError(problems)
    values = {
        FIRST_MESSAGE_META: first_message,
        SCENARIO_META: scenario,
        ALTERNATE_GREETINGS_META: json.dumps(alternate_greetings, ensure_ascii=False) if alternate_greetings else "",
    }
    with transaction.atomic():
        for key, value in values.items():
            if value:
                UniverseMeta.objects.update_or_create(universe=universe, key=key, defaults={"value": value})
            else:
                UniverseMeta.objects.filter(universe=universe, key=key).delete()
    return Opening(first_message=first_message, alternate_greetings=alternate_greetings, scenario=scenario)

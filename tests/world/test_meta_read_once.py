"""`meta_read_once()`: a request that reads a universe's meta in many places reads it once (issue 33)."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from studio.world.models import Universe, UniverseMeta, meta_read_once

pytestmark = pytest.mark.django_db


def _meta_reads(queries) -> int:
    return sum(1 for q in queries if "universes_universemeta" in q["sql"] and q["sql"].lstrip().startswith("SELECT"))


@pytest.fixture
def universe(django_user_model):
    owner = django_user_model.objects.create_user("meta-owner")
    universe = Universe.objects.create(name="Port Vey", slug="port-vey-meta", owner=owner)
    UniverseMeta.objects.create(universe=universe, key="tone", value="grim")
    return universe


def test_outside_a_block_every_call_reads(universe):
    with CaptureQueriesContext(connection) as queries:
        assert universe.meta_values() == {"tone": "grim"}
        assert universe.meta_values() == {"tone": "grim"}
    assert _meta_reads(queries) == 2


def test_inside_a_block_a_universe_is_read_once_and_each_caller_gets_its_own_copy(universe):
    with meta_read_once(), CaptureQueriesContext(connection) as queries:
        first = universe.meta_values()
        first["tone"] = "changed by a caller"
        again = Universe.objects.get(pk=universe.pk).meta_values()  # another instance of the same universe
    assert again == {"tone": "grim"}
    assert _meta_reads(queries) == 1


def test_a_meta_row_written_in_the_block_shows_at_once(universe):
    with meta_read_once():
        assert universe.meta_values() == {"tone": "grim"}
        row = UniverseMeta.objects.get(universe=universe, key="tone")
        row.value = "bright"
        row.save()
        assert universe.meta_values() == {"tone": "bright"}
        UniverseMeta.objects.create(universe=universe, key="era", value="1890")
        assert universe.meta_values() == {"tone": "bright", "era": "1890"}
        row.delete()
        assert universe.meta_values() == {"era": "1890"}
    with CaptureQueriesContext(connection) as queries:
        universe.meta_values()
    assert _meta_reads(queries) == 1  # the block is over: reads again

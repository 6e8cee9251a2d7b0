"""Save files, fuzzed and played at random.

- Any bytes, and any JSON, are read or refused with SaveFileError, never another exception.
- A valid file with one random mutation (a key dropped, a value replaced by random JSON, an
  item duplicated or two swapped, a number nudged, the bytes cut short) either imports, and
  then its new save exports a file that imports to the same bytes, or is refused whole with
  nothing written.
- After random play (facts, CREATE / UPDATE / DELETE, model refreshes, a rewind), the export
  of the imported save equals the original's byte for byte, and so does the export after
  the same further rewind of both.
"""

from __future__ import annotations

import gzip
import itertools
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from studio.saves import portable
from studio.saves.checkpoints import CheckpointManager
from studio.world.models import Save, Universe

from .portable_support import rich_save, table_counts
from .scenario import draw_turn, play_turn, snapshot
from tests.fakes import FakeVectorMemory

pytestmark = pytest.mark.django_db


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**40), 2**40)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=5),
    max_leaves=20,
)


def read_or_refuse(data: bytes):
    try:
        return portable.save_file_read(data=data)
    except portable.SaveFileError as error:
        assert error.problems and all(p.message for p in error.problems)
        return None


@given(raw=st.binary(max_size=600), as_gzip=st.booleans())
def test_any_bytes_are_read_or_refused_cleanly(raw, as_gzip):
    assert read_or_refuse(gzip.compress(raw) if as_gzip else raw) is None


@given(doc=json_values, header=st.booleans())
def test_any_json_is_checked_or_refused_cleanly(doc, header):
    if header and isinstance(doc, dict):
        doc = {**doc, "format": "axiom-save", "format_version": 1}
    read_or_refuse(json.dumps(doc).encode())


def paths(value, prefix=()):
    """Every path into a JSON value (keys and indexes), the root excluded."""
    out = []
    stack = [(value, prefix)]
    while stack:
        node, path = stack.pop()
        children = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
        for key, child in children:
            out.append(path + (key,))
            stack.append((child, path + (key,)))
    return sorted(out, key=repr)


def parent_of(document, path):
    node = document
    for key in path[:-1]:
        node = node[key]
    return node


@pytest.fixture
def valid_file(universe) -> bytes:
    return portable.save_export(game_save=rich_save(universe)).read()


@given(data=st.data())
def test_a_mutated_file_imports_whole_or_not_at_all(universe, valid_file, data):
    document = json.loads(valid_file)
    where = data.draw(st.sampled_from(paths(document)), label="path")
    parent, key = parent_of(document, where), where[-1]
    mutation = data.draw(
        st.sampled_from(["drop", "replace", "nudge", "duplicate", "swap", "truncate"]), label="mutation"
    )
    raw = None
    if mutation == "drop":
        del parent[key]
    elif mutation == "replace":
        parent[key] = data.draw(json_values, label="value")
    elif mutation == "nudge":
        value = parent[key]
        parent[key] = (
            value + data.draw(st.sampled_from([-1, 1]))
            if isinstance(value, int) and not isinstance(value, bool)
            else None
        )
    elif mutation in ("duplicate", "swap") and isinstance(parent, list):
        other = data.draw(st.integers(0, len(parent) - 1), label="other")
        if mutation == "duplicate":
            parent.insert(other, parent[key])
        else:
            parent[key], parent[other] = parent[other], parent[key]
    elif mutation == "truncate":
        raw = valid_file[: data.draw(st.integers(0, len(valid_file) - 1), label="cut")]
    raw = raw if raw is not None else json.dumps(document).encode()
    before = table_counts()
    try:
        result = portable.save_import(universe=universe, data=raw)
    except portable.SaveFileError:
        assert table_counts() == before
        return
    exported = portable.save_export(game_save=result.game_save).read()
    again = portable.save_import(universe=universe, data=exported).game_save
    assert portable.save_export(game_save=again).read() == exported


_counter = itertools.count()


@settings(max_examples=30)
@given(data=st.data())
def test_random_play_round_trips_byte_for_byte(db, data):
    world, _ = Universe.objects.get_or_create(slug="prop", defaults={"name": "Prop"})
    save = Save.objects.create(universe=world, name=f"p{next(_counter)}", memory_mode="living")
    vector = FakeVectorMemory()
    facts = itertools.count()
    manager = CheckpointManager(vector_memory=vector)
    for _ in range(data.draw(st.integers(1, 6), label="turns")):
        play_turn(save, vector=vector, narrative=f"turn {save.current_turn + 1}", **draw_turn(data, save, facts))
        if data.draw(st.booleans(), label="rewind now") and save.current_turn > 1:
            manager.rewind(save, data.draw(st.integers(0, save.current_turn - 1), label="target"))
            save.refresh_from_db()
    original = portable.save_export(game_save=save).read()
    imported = portable.save_import(universe=world, data=original).game_save
    assert portable.save_export(game_save=imported).read() == original
    assert snapshot(imported) == snapshot(save)
    if save.current_turn:
        target = data.draw(st.integers(0, save.current_turn - 1), label="later rewind")
        manager.rewind(save, target)
        manager.rewind(imported, target)
        assert portable.save_export(game_save=imported).read() == portable.save_export(game_save=save).read()

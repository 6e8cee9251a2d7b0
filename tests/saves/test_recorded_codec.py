"""The save file's codec of recorded contexts and queries (`saves/portable/recorded.py`): exact,
and small when candidates only move: an unchanged item is its ref's number, a moved one a row
of the numbers that changed, its text, reason and cut written once."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from studio.saves.narrator.snapshots import Reference
from studio.saves.portable import recorded
from studio.saves.portable.recorded import RecordCodec, VerifiedWriter
from studio.saves.portable.recorded_items import make_template, render_template, same, short_float32


def reordered(value):
    """The same value with every object's keys in reverse order (PostgreSQL's jsonb gives its own order)."""
    if isinstance(value, dict):
        return {key: reordered(value[key]) for key in reversed(list(value))}
    if isinstance(value, list):
        return [reordered(item) for item in value]
    return value


def round_trip(values: list, reference: str = "") -> list:
    """Write a sequence of values (each against the one before) with one codec, read it with another.

    The writer gets them with their keys in another order than the reader rebuilds them in, as
    an export from PostgreSQL does."""
    writer, reader = RecordCodec(), RecordCodec()
    out, previous_written, previous_read = [], None, None
    for value in map(reordered, values):
        encoded = json.loads(json.dumps(writer.encode(value, previous_written, Reference(reference))))
        back = reader.decode(encoded, previous_read, reference)
        out.append((encoded, back))
        previous_written, previous_read = value, back
    return out


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-5, 300)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=90)
    | st.sampled_from(["rank 3 (distance 0.125)", "turn 12 is shown", "$s", "$v"]),
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(st.sampled_from(["a", "b", "ref", "$s", "why", "layer", "x.y"]), children, max_size=4)
    ),
    max_leaves=15,
)


@settings(max_examples=300, deadline=None)
@given(values=st.lists(json_values, min_size=1, max_size=5), reference=st.text(max_size=200))
def test_any_json_values_rebuild_exactly(values, reference):
    for value, (_encoded, back) in zip(values, round_trip(values, reference)):
        assert same(back, value)


@st.composite
def contexts(draw):
    """Snapshots of a memory context: candidates (from a pool of refs) that come, go, move and change."""
    snapshots = []
    for _ in range(draw(st.integers(1, 5))):
        refs = draw(st.lists(st.integers(0, 12), max_size=10, unique=True))
        items = []
        for rank, ref in enumerate(refs, start=1):
            layer = draw(st.sampled_from(["narrative", "chapter"]))
            distance = draw(st.sampled_from([0.125, 0.1230391860008239, 0.2, 1 / 3])) + ref / 100
            key = f"chunk:{ref:08x}abcdef"
            items.append(
                {
                    "layer": layer,
                    "ref": {"chunk_id": key[6:], "key": key, "turn_id": ref},
                    "text": draw(st.sampled_from([f"chunk {ref} text", f"(turn {ref}) chunk {ref} text"])),
                    "tokens": draw(st.sampled_from([ref, 20, 21])),
                    "included": draw(st.booleans()),
                    "cut": draw(
                        st.sampled_from(
                            ["", f"already in the prompt: turn {ref} is shown", "over budget: needs 12 tokens"]
                        )
                    ),
                    "reason": draw(
                        st.sampled_from(
                            [f"narrative chunk, rank {rank} (distance {distance:.3f})", "retrieved", f"turn {ref}"]
                        )
                    ),
                    "why": draw(
                        st.sampled_from(
                            [
                                {"final_rank": rank, "rrf_score": 1 / (60 + rank), "semantic_distance": distance},
                                {"final_rank": rank, "turn_id": ref, "window_start": draw(st.integers(0, 3))},
                                {"final_rank": True, "flag": 1.0},
                                {},
                            ]
                        )
                    ),
                }
            )
        snapshots.append(
            {
                "items": items,
                "notes": draw(st.lists(st.sampled_from(["a note", "chunk:0000000cabcdef"]), max_size=2)),
                "queries": [
                    {
                        "result_ids": [item["ref"]["key"] for item in items],
                        "labels": {item["ref"]["key"]: item["text"] for item in items},
                    }
                ],
            }
        )
    return snapshots


@settings(max_examples=300, deadline=None)
@given(snapshots=contexts())
def test_contexts_whose_candidates_come_go_move_and_change_rebuild_exactly(snapshots):
    for value, (_encoded, back) in zip(snapshots, round_trip(snapshots)):
        assert same(back, value)


def narrative(ref: int, rank: int, distance: float) -> dict:
    key = f"chunk:{ref:032x}"
    return {
        "layer": "narrative",
        "ref": {"chunk_id": key[6:], "key": key, "turn_id": ref},
        "text": f"(turn {ref}) " + "The tide. " * 30,
        "tokens": 80,
        "included": False,
        "cut": f"already in the prompt: turn {ref} is shown in full under “Recent turns”",
        "reason": f"narrative chunk, rank {rank} (semantic #{rank} (distance {distance:.3f}))",
        "why": {
            "final_rank": rank,
            "fused_rank": rank,
            "semantic_rank": rank,
            "rrf_score": 1 / (60 + rank),
            "semantic_distance": short_float32_value(distance),
            "bm25_score": None,
        },
    }


def short_float32_value(value: float) -> float:
    import struct

    return struct.unpack("<f", struct.pack("<f", value))[0]


def test_a_candidate_that_only_moved_is_its_ref_and_its_distance():
    first = {"items": [narrative(ref, rank, 0.1 + rank / 100) for rank, ref in enumerate(range(30), start=1)]}
    moved = list(reversed(range(30)))  # every candidate ranks elsewhere, at another distance
    second = {"items": [narrative(ref, rank, 0.2 + rank / 97) for rank, ref in enumerate(moved, start=1)]}
    same_again = {"items": second["items"]}
    (_, _), (encoded, back), (again, _) = round_trip([first, second, {**same_again, "notes": ["changed"]}])
    assert same(back, second)
    entries = encoded["items"]["$items"]
    header, rows = entries[0], entries[1:]
    # The ranks and their score are the previous snapshot's at the same place; the reason is made from the item's numbers.
    assert header["$p"] == ["why.final_rank", "why.fused_rank", "why.rrf_score", "why.semantic_rank"]
    assert header["$c"] == header["$f"] == ["why.semantic_distance"] and set(header["$t"]) == {"reason"}
    assert all(len(row) == 2 and isinstance(row[0], int) and isinstance(row[1], float) for row in rows)
    assert len(json.dumps(rows)) < 30 * 24  # about 20 bytes a candidate, against ~700 written whole
    assert "items" not in again  # unchanged: nothing of it is written
    # An unchanged candidate in a list that changed is its ref's number.
    third = {"items": [*second["items"][:5], narrative(99, 6, 0.5)]}
    (_, _), (_, _), (encoded, back) = round_trip([first, second, third])
    assert same(back, third) and all(type(entry) is int for entry in encoded["items"]["$items"][:5])


def test_a_new_candidate_is_written_against_the_one_before_it_with_its_strings_made_from_its_numbers():
    first = {"items": [narrative(1, 1, 0.1), narrative(2, 2, 0.2)]}
    second = {"items": [narrative(1, 1, 0.1), narrative(2, 2, 0.2), narrative(3, 3, 0.3), narrative(4, 4, 0.4)]}
    (_, _), (encoded, back) = round_trip([first, second])
    assert same(back, second)
    new = encoded["items"]["$items"][2:]
    assert (
        {"cut", "reason", "ref.key"} <= set(new[0]["$t"]) and "cut" not in new[0]["$n"] and "reason" not in new[0]["$n"]
    )
    assert all(isinstance(number, int) for number in new[1]["$t"].values())  # the same templates, by number


def test_labels_and_result_ids_already_written_are_numbers():
    keys = [f"chunk:{n:032x}" for n in range(40)]
    first = {"result_ids": keys[:30], "labels": {key: f"label of {key}" for key in keys[:30]}}
    second = {"result_ids": keys[10:40], "labels": {key: f"label of {key}" for key in keys[10:40]}}
    third = {"result_ids": keys[:30], "labels": first["labels"]}
    (_, _), (encoded, back), (again, back_again) = round_trip([first, second, third])
    assert same(back, second) and same(back_again, third)
    assert all(type(n) is int for n in encoded["result_ids"]["$I"][:20])  # the 20 written before
    assert [entry for entry in again["labels"]["$+"] if len(entry) != 1] == []  # each label's last value: its key alone


def test_templates_and_32_bit_floats():
    item = {
        "ref": {"key": "chunk:abcdef0123", "chunk_id": "abcdef0123"},
        "why": {"final_rank": 7, "semantic_distance": 0.12303918600082397},
    }
    template = make_template("rank 7 (distance 0.123)", item, "reason")
    assert template == ["rank ", ["why.final_rank"], " (distance ", ["why.semantic_distance", 3], ")"]
    assert render_template(template, item) == "rank 7 (distance 0.123)"
    assert make_template("chunk:abcdef0123", item, "ref.key") == ["chunk:", ["ref.chunk_id"]]
    assert make_template("id 5fbe0bb7 here", item, "x") is None  # digits inside a word are not numbers
    assert short_float32(0.12303918600082397) == 0.123039186  # 9 digits, not 17
    assert short_float32(0.1) is None  # not a 32-bit float: written as it is
    assert not same(1, True) and not same(1, 1.0) and not same(0.0, -0.0) and same({"a": [1]}, {"a": [1]})


@pytest.mark.parametrize(
    "encoded, problem",
    [
        ({"items": {"$items": [7]}}, "table of items"),
        ({"items": {"$items": [[0, 1.5]]}}, "row must follow its columns"),
        ({"items": {"$items": [{"$h": 3}]}}, "columns 3"),
        ({"items": {"$items": [{"$c": ["a"], "$f": ["b"]}]}}, "every \\$f path"),
        ({"items": {"$items": [{"$c": [], "$t": {"reason": [["why.nothing"]]}}]}}, None),
        ({"labels": {"$+": [[5]]}}, "string 5"),
        ({"labels": {"$x": 1}}, "no marker"),
        ({"labels": {"$-": ["absent"]}}, "removes the key"),
        ({"notes": {"$s": 1}}, "previous"),
        ({"text": {"$d": [[0, 99]]}}, "delta"),
    ],
)
def test_a_marker_that_does_not_fit_is_refused(encoded, problem):
    reader = RecordCodec()
    previous = {"labels": {}, "notes": None, "items": [], "text": "earlier"}
    if problem is None:  # a template is checked where it is used
        reader.decode(encoded, previous, "")
        return
    with pytest.raises(ValueError, match=problem):
        reader.decode(encoded, previous, "short")


def test_a_value_that_would_not_read_back_is_written_whole_and_both_codecs_start_again(monkeypatch):
    first = {"items": [narrative(1, 1, 0.1)]}
    second = {"items": [narrative(1, 2, 0.2), narrative(2, 1, 0.1)]}
    writer = VerifiedWriter()
    (written_first,) = writer.write([first], [None], Reference(""), "")
    original = RecordCodec.decode
    monkeypatch.setattr(RecordCodec, "decode", lambda self, *args, **kw: {"broken": True})
    (written,) = writer.write([second], [first], Reference(""), "")
    monkeypatch.setattr(RecordCodec, "decode", original)
    assert written == {"$v": second} and RecordCodec.reset_at(written)
    # A reader starts again at it, as the writer did: what comes after still reads back.
    third = {"items": [narrative(1, 1, 0.3), narrative(2, 2, 0.1)]}
    (written_third,) = writer.write([third], [second], Reference(""), "")
    reader = RecordCodec()
    assert same(reader.decode(written_first, None, ""), first)
    reader = RecordCodec()  # reset_at
    assert same(reader.decode(written, first, ""), second)
    assert same(reader.decode(json.loads(json.dumps(written_third)), second, ""), third)
    assert recorded.VERBATIM == "$v"

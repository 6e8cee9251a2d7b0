"""The tolerant JSON reader and the field cleaners, on the shapes real models produce."""

from __future__ import annotations

import json

import pytest

from studio.memory.llm.normalise import (
    is_placeholder,
    is_time_only,
    looks_temporal,
    name_leading_pronoun,
    second_person_to_name,
    split_names,
    statement_key,
    text_value,
)
from studio.memory.llm.parsing import parse_items, parse_json_payload, salvage_json_objects, scan_items, scan_json


def test_a_complete_answer_reads_as_json():
    scan = scan_json('{"facts": [{"statement": "A.", "who": ["X", "Y"]}]}')
    assert scan.values == [{"facts": [{"statement": "A.", "who": ["X", "Y"]}]}]
    assert not scan.truncated and not scan.broken and scan.is_complete(scan.values[0])


def test_a_fenced_answer_cut_mid_string_keeps_the_complete_items():
    text = '```json\n{"facts": [\n  {"statement": "A.", "entities": ["X"]},\n  {"statement": "B.", "who": "Y"},\n  {"statement": "C is cu'
    scan = scan_items(text, "facts")
    assert scan.items == [{"statement": "A.", "entities": ["X"]}, {"statement": "B.", "who": "Y"}]
    assert scan.truncated and scan.found_json


@pytest.mark.parametrize(
    "cut",
    [
        '{"facts": [{"statement": "A."}, {"statement": "B."}, ',
        '{"facts": [{"statement": "A."}, {"statement": "B."}, {"statement"',
        '{"facts": [{"statement": "A."}, {"statement": "B."}, {"statement": "C.", "who": ["X", "Y',
        '{"facts": [{"statement": "A."}, {"statement": "B."}, {"statement": "C.", "n": 12',
        '{"facts": [{"statement": "A."}, {"statement": "B."}, {"statement": "C.", "ok": tr',
        '{"facts": [{"statement": "A."}, {"statement": "B."}, {"statement": "C.\\',
    ],
)
def test_a_cut_at_any_point_keeps_exactly_the_complete_items(cut):
    result = scan_items(cut, "facts")
    assert result.items == [{"statement": "A."}, {"statement": "B."}] and result.truncated


def test_a_cut_single_item_object_is_dropped_not_half_stored():
    result = scan_items('{"statement": "A.", "who": "Wr', "facts")
    assert result.items == [] and result.dropped_incomplete == 1 and result.truncated


def test_prose_around_and_between_json_is_skipped():
    text = (
        'Sure! Here are the facts {as requested} [see below]:\n{"facts": [{"statement": "A."}]}\nHope that helps {:)}'
    )
    assert parse_items(text, "facts") == [{"statement": "A."}]


def test_a_repeated_answer_gives_all_its_items():
    one = '{"facts": [{"statement": "A."}]}'
    assert parse_items(one + "\n" + one, "facts") == [{"statement": "A."}, {"statement": "A."}]


def test_small_model_json_slips_are_accepted():
    text = '{\'facts\': [{statement: \'A.\', "who": "X",}, {"statement": "B." "why": None,}  {"statement": "C."},],}'
    items = parse_items(text, "facts")
    assert items == [{"statement": "A.", "who": "X"}, {"statement": "B.", "why": None}, {"statement": "C."}]


def test_raw_newlines_inside_strings_are_accepted():
    assert parse_items('{"facts": [{"statement": "A\nB."}]}', "facts") == [{"statement": "A\nB."}]


def test_other_shapes_of_the_item_list():
    assert parse_items('[{"statement": "A."}]', "facts") == [{"statement": "A."}]
    assert parse_items('{"statement": "A."}', "facts") == [{"statement": "A."}]
    assert parse_items('{"Facts": [{"statement": "A."}]}', "facts") == [{"statement": "A."}]
    assert parse_items('{"result": {"facts": [{"statement": "A."}]}}', "facts") == [{"statement": "A."}]
    assert parse_items('[{"facts": [{"statement": "A."}]}, {"facts": [{"statement": "B."}]}]', "facts") == [
        {"statement": "A."},
        {"statement": "B."},
    ]
    assert parse_items('{"facts": {"statement": "A."}}', "facts") == [{"statement": "A."}]
    assert parse_items("no json here", "facts") is None
    assert parse_items("{not json}", "facts") is None


def test_an_object_that_is_not_an_item_holding_one_list_gives_that_list():
    text = '{"extracted": [{"statement": "A."}], "count": 1}'
    assert scan_items(text, "facts", is_item=lambda d: "statement" in d).items == [{"statement": "A."}]


def test_parse_json_payload_tolerates_fences_and_prose():
    assert parse_json_payload('```json\n{"a": 1}\n```') == {"a": 1}
    assert parse_json_payload('Sure! Here it is: {"a": [1, 2]} Hope that helps.') == {"a": [1, 2]}
    assert parse_json_payload("[1, 2]") == [1, 2]
    assert parse_json_payload("no json here") is None
    assert parse_json_payload('{"a": "cut') is None


def test_salvage_keeps_complete_objects_of_a_truncated_list():
    text = '{"facts": [{"statement": "A."}, {"statement": "B.", "meta": {"k": 1}}, {"statement": "C'
    assert salvage_json_objects(text) == [{"statement": "A."}, {"statement": "B.", "meta": {"k": 1}}]
    assert salvage_json_objects('{"x": 1}') == [json.loads('{"x": 1}')]


# -- field cleaners ---------------------------------------------------------------------------


def test_text_value_joins_lists_and_names_objects():
    assert text_value(["Wren", "Pim", "wren"]) == "Wren, Pim"
    assert text_value({"name": "Gullhaven"}) == "Gullhaven"
    assert text_value(["went", "down"], joiner=" ") == "went down"
    assert text_value(None) == "" and text_value(True) == "" and text_value(3) == "3"
    assert text_value("  two   spaces ") == "two spaces"


@pytest.mark.parametrize(
    "value, kind",
    [
        ("you", "who"),
        ("You", "entity"),
        ("the player", "who"),
        ("someone", "who"),
        ("the environment", "who"),
        ("your location", "where"),
        ("Your current location", "where"),
        ("here", "where"),
        ("the environment", "where"),
        ("now", "when"),
        ("Right now", "when"),
        ("the present", "when"),
        ("unknown", ""),
        ("N/A", "when"),
        ("", "who"),
    ],
)
def test_placeholders(value, kind):
    assert is_placeholder(value, kind)


@pytest.mark.parametrize(
    "value, kind",
    [
        ("Wren Halloway", "who"),
        ("Gullhaven", "where"),
        ("the second ebb", "when"),
        ("Youssef", "who"),
        ("Day 3", "when"),
    ],
)
def test_real_values_are_not_placeholders(value, kind):
    assert not is_placeholder(value, kind)


def test_time_and_place_shapes():
    assert looks_temporal("at dawn") and looks_temporal("two days ago") and looks_temporal("the second ebb")
    assert not looks_temporal("Reedmarket") and not looks_temporal("in the kitchen")
    assert is_time_only("at dawn") and is_time_only("Day 3") and not is_time_only("the harbour at dawn")


def test_split_names():
    assert split_names("Wren, Pim and Corvin Tull") == ["Wren", "Pim", "Corvin Tull"]
    assert split_names("") == []


@pytest.mark.parametrize(
    "before, after",
    [
        ("You unfold the note.", "Wren unfolds the note."),
        ("You check your own gear.", "Wren checks Wren's own gear."),
        ("Corvin hands you the helm.", "Corvin hands Wren the helm."),
        ("You have a cracked helm and you carry a knife.", "Wren has a cracked helm and Wren carries a knife."),
        ("You crossed the bridge.", "Wren crossed the bridge."),
        ("You can dive at six fathoms.", "Wren can dive at six fathoms."),
        ("You never mend it.", "Wren never mends it."),
        ("You need a helm.", "Wren needs a helm."),
        ("You're the last diver.", "Wren is the last diver."),
        ("Pim trusts you.", "Pim trusts Wren."),
        ("The note is for Youssef.", "The note is for Youssef."),
    ],
)
def test_second_person_becomes_the_player_character(before, after):
    assert second_person_to_name(before, "Wren") == after


def test_a_leading_pronoun_is_named():
    assert name_leading_pronoun("Her kettle is cold.", "Hesper Vale") == "Hesper Vale's kettle is cold."
    assert (
        name_leading_pronoun("She is never gone three ebbs.", "Hesper Vale") == "Hesper Vale is never gone three ebbs."
    )
    assert name_leading_pronoun("Hesper left.", "Hesper Vale") == "Hesper left."


def test_statement_key_ignores_case_punctuation_and_articles():
    assert statement_key("Hesper left the house.") == statement_key("hesper  left  a house")
    assert statement_key("Hesper left.") != statement_key("Hesper returned.")

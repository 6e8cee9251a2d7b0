"""Memory tests in Universe-as-Code: `[[memory_tests]]` round-trips byte for byte, an import makes the tests
match the file (with a diff first), and a bad table names its line and field and changes nothing."""

from __future__ import annotations

import pytest

from studio.universes import services
from studio.universes.interchange import ImportFormatError
from studio.universes.interchange.toml_io import diff_document, export_universe, parse_document
from studio.universes.memory_tests.services import memory_test_create
from studio.universes.models import MemoryTest

pytestmark = pytest.mark.django_db

TESTS = [
    {
        "name": "kael-knows",
        "kind": "knows",
        "character": "Kaël",
        "entry": "port-vey",
        "turn": 2,
        "description": 'Kaël knows\nthe harbour "well".',
    },
    {
        "name": "no-crowns",
        "kind": "knows",
        "character": "Mira",
        "fact": "forty crowns",
        "knows": False,
        "turn": 1,
        "until": 9,
    },
    {
        "name": "harbour-in-context",
        "kind": "context",
        "action": "I walk to the harbour.",
        "entry": "port-vey",
        "pov": ["Kaël", "Mira"],
        "includes": False,
    },
    {
        "name": "debt-belief",
        "kind": "belief",
        "subject": "Kaël",
        "statement": "owes",
        "trend": "new",
        "holder": "Mira",
        "exists": False,
    },
    {"name": "no-leaks", "kind": "no_findings", "turn": 3, "until": 7, "finding": "leak"},
]


@pytest.fixture
def tested(universe):
    for record in TESTS:
        memory_test_create(universe=universe, data=record)
    return universe


def test_round_trip_into_a_new_universe_is_byte_identical(tested, author):
    text = export_universe(tested)
    assert text.count("[[memory_tests]]") == 5
    names = [line.split('"')[1] for line in text.splitlines() if line.startswith("name = ") and "-" in line]
    assert names == sorted(record["name"] for record in TESTS)
    assert 'pov = [\n    "Kaël",\n    "Mira",\n]' in text or 'pov = ["Kaël", "Mira"]' in text
    assert "until" not in text.split('name = "kael-knows"')[1].split("[[")[0]  # no null in TOML: absent
    copy_text = text.replace('slug = "test-world"', 'slug = "copy-world"')
    copy, counts = services.universe_import_document(user=author, document=parse_document(copy_text))
    assert counts["tests_created"] == 5
    assert export_universe(copy) == copy_text
    assert {t.name: t.spec.as_dict() for t in copy.memory_tests.all()} == {
        t.name: t.spec.as_dict() for t in tested.memory_tests.all()
    }
    _, again = services.universe_import_document(user=author, document=parse_document(text), universe=tested)
    assert (again["tests_unchanged"], again["tests_updated"], again["tests_created"], again["tests_deleted"]) == (
        5,
        0,
        0,
        0,
    )


def test_an_import_makes_the_tests_match_the_file_with_a_diff_first(tested, author):
    text = export_universe(tested)
    changed = text.replace('finding = "leak"', 'finding = "presence"')
    changed = changed.replace('name = "kael-knows"', 'name = "kael-knows-it"')
    changed = changed.replace('name = "debt-belief"', 'name = "debt-belief"\ndescription = "Nobody believes it."')
    document = parse_document(changed)
    diff = diff_document(tested, document)
    assert (diff.tests_created, diff.tests_changed, diff.tests_deleted, diff.tests_unchanged) == (
        ["kael-knows-it"],
        ["debt-belief", "no-leaks"],
        ["kael-knows"],
        2,
    )
    assert diff.overwrites and not diff.is_empty
    services.universe_import_document(user=author, document=document, universe=tested)
    assert sorted(tested.memory_tests.values_list("name", flat=True)) == [
        "debt-belief",
        "harbour-in-context",
        "kael-knows-it",
        "no-crowns",
        "no-leaks",
    ]
    assert tested.memory_tests.get(name="no-leaks").params["finding"] == "presence"
    assert diff_document(tested, parse_document(export_universe(tested))).is_empty


@pytest.mark.parametrize(
    "old, new, message",
    [
        ('kind = "no_findings"', 'kind = "nothing"', "memory_tests[4] (no-leaks).kind: must be one of"),
        ('finding = "leak"', 'finding = "leak"\ncolour = "red"', "memory_tests[4] (no-leaks).colour: is not a field"),
        ('entry = "port-vey"', 'entry = "nowhere"', "(harbour-in-context).entry: “nowhere” is not an entry_id"),
        ('name = "no-leaks"', 'name = "no-crowns"', "(no-crowns).name: used twice"),
        ("knows = false", 'knows = "no"', "(no-crowns).knows: must be true or false"),
        ("until = 9", "until = 0", "(no-crowns).until: must be at least turn (1)"),
    ],
)
def test_a_bad_table_names_its_line_and_field_and_changes_nothing(tested, author, old, new, message):
    text = export_universe(tested)
    assert old in text
    bad = text.replace(old, new, 1)
    with pytest.raises(ImportFormatError) as caught:
        parse_document(bad)
    assert message in str(caught.value)
    assert str(caught.value).startswith("line ")
    field = message.split(").")[1].split(":")[0]
    if f"{field} = " in new:  # the line of the changed field, where the replacement put it
        line = (
            bad[: text.index(old)].count("\n")
            + 1
            + next(i for i, part in enumerate(new.splitlines()) if part.startswith(f"{field} = "))
        )
        assert str(caught.value).startswith(f"line {line}:")
    assert MemoryTest.objects.count() == 5

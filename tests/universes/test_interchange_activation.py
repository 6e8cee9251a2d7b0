"""Activation fields through interchange: SillyTavern and CCv3 files with every field, TOML.

The fixtures (tests/universes/fixtures/) are hand-written files in each tool's format that
set every entry field (and decorators, fallbacks, unknown fields). Import must map what the
studio acts on onto the activation columns, keep the rest, report which is which, and
export must give back the same value for every field of every entry.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from studio.memory.lore_activation import CompiledBook, LoreDefaults, activate, scan_messages, spec_from_entry
from studio.universes import services
from studio.universes.activation import STUDIO_DEFAULTS, activation_values
from studio.universes.interchange import ImportFormatError, card_export, character_card, sillytavern, toml_io
from studio.world.models import Universe
from studio.universes.selectors import with_link_ids

pytestmark = pytest.mark.django_db
FIXTURES = Path(__file__).parent / "fixtures"


def load(name: str) -> dict:
    return json.loads((FIXTURES / name).read_text())


def without_axiom(item: dict, original: dict | None = None) -> dict:
    """The exported entry without the studio's own `extensions.axiom` (and `extensions` if only that)."""
    item = copy.deepcopy(item)
    extensions = item.get("extensions")
    if isinstance(extensions, dict):
        extensions.pop("axiom", None)
        if not extensions and (original is None or "extensions" not in original):
            item.pop("extensions")
    return item


@pytest.fixture
def empty_universe(author) -> Universe:
    return services.universe_create(user=author, name="Reach")


def entries_of(universe):
    return list(with_link_ids(universe.lore_entries.all()))


def st_import(universe, author, doc):
    book = sillytavern.parse_world_info(json.dumps(doc).encode())
    return services.lore_import(universe=universe, user=author, book=book)


# --- SillyTavern ----------------------------------------------------------------------------


def test_sillytavern_round_trip_keeps_every_field_of_every_entry(empty_universe, author):
    original = load("sillytavern_all_fields.json")
    st_import(empty_universe, author, original)
    exported = sillytavern.export_world_info(empty_universe, entries_of(empty_universe))
    assert set(exported["entries"]) == set(original["entries"])
    for uid, entry in original["entries"].items():
        assert without_axiom(exported["entries"][uid], entry) == entry, uid
    assert {k: v for k, v in exported.items() if k != "entries"} == {
        k: v for k, v in original.items() if k != "entries"
    }
    # and once more: an export re-imported is identical
    report = st_import(empty_universe, author, exported)
    assert {line.outcome for line in report.lines} == {"skipped"}


def test_sillytavern_fields_act_on_the_columns(empty_universe, author):
    st_import(empty_universe, author, load("sillytavern_all_fields.json"))
    by_uid = {e.extensions["sillytavern"]["uid"]: e for e in empty_universe.lore_entries.all()}
    hood = by_uid[1]
    assert hood.text == "A tavern with a copper-hooded chimney."  # the decorator line is not narrated
    assert activation_values(hood) | {} == {
        **STUDIO_DEFAULTS,
        "secondary_keys": ["ale", "smoke"],
        "selective": True,
        "selective_logic": 3,
        "constant": False,
        "enabled": True,
        "insertion_order": 90,
        "position": 4,
        "depth": 2,
        "role": 1,
        "probability": 37,
        "use_probability": True,
        "inclusion_group": "taverns, places",
        "group_prioritize": True,
        "group_weight": 40,
        "group_scoring": True,
        "scan_depth": 5,
        "case_sensitive": True,
        "match_whole_words": True,
        "sticky": 3,
        "cooldown": 2,
        "delay": 4,
        "exclude_recursion": True,
        "prevent_recursion": True,
        "delay_until_recursion": 1,
        "ignore_budget": True,
        "vectorized": False,
        "forced": "activate",
    }
    salt = by_uid[2]
    assert salt.text == "Salt crusts every rope." and salt.title == "salt"
    assert (salt.enabled, salt.constant, salt.selective, salt.forced) == (False, True, False, "dont_activate")
    assert (salt.sticky, salt.cooldown, salt.delay, salt.group_weight, salt.scan_depth) == (0, 0, 0, 100, 0)
    assert (salt.position, salt.depth, salt.delay_until_recursion) == (7, 4, 2)  # @@depth is not SillyTavern's
    gulls = by_uid[7]
    # absent useProbability: SillyTavern does not roll (`!entry.useProbability`); 55.5 acts as 56
    assert (gulls.use_probability, gulls.probability, gulls.selective, gulls.vectorized) == (False, 56, False, False)


def test_sillytavern_report_says_what_acts_and_what_is_only_kept(empty_universe, author):
    report = st_import(empty_universe, author, load("sillytavern_all_fields.json"))
    lines = {line.label: line for line in report.lines}
    hood = lines["entry uid 1"]
    assert {"key", "keysecondary", "selectiveLogic", "probability", "sticky", "@@activate"} <= set(hood.acting)
    assert {"uid", "comment", "automationId", "displayIndex", "futureField", "triggers"} <= set(hood.kept)
    assert any(w.startswith("automationId:") for w in hood.warnings)
    assert any(w.startswith("triggers:") for w in hood.warnings)
    assert "@@depth 3 (SillyTavern ignores it)" in lines["entry uid 2"].kept
    assert any(w.startswith("matchPersonaDescription:") for w in lines["entry uid 8"].warnings)
    assert not lines["entry uid 0"].warnings  # empty characterFilter / triggers warn about nothing


def test_report_names_regex_keys_that_do_not_compile(empty_universe, author):
    doc = {"entries": {"0": {"uid": 0, "key": ["/drag(on/i", "wyrm"], "content": "x"}}}
    report = st_import(empty_universe, author, doc)
    assert any("“/drag(on/i”" in w and "plain text" in w for w in report.lines[0].warnings)
    assert empty_universe.lore_entries.get().keys == ["/drag(on/i", "wyrm"]  # imports keep the file's keys


def test_sillytavern_export_writes_studio_edits_into_the_files_fields(empty_universe, author):
    original = load("sillytavern_all_fields.json")
    st_import(empty_universe, author, original)
    hood = next(e for e in empty_universe.lore_entries.all() if e.extensions["sillytavern"]["uid"] == 1)
    services.lore_entry_update(
        entry=hood,
        user=author,
        activation={"probability": 80, "sticky": 0, "forced": "", "enabled": False, "delay_until_recursion": 3},
    )
    item = without_axiom(sillytavern.export_world_info(empty_universe, entries_of(empty_universe))["entries"]["1"])
    expected = {
        **original["entries"]["1"],
        "probability": 80,
        "sticky": 0,
        "disable": True,
        "delayUntilRecursion": 3,
        "content": "A tavern with a copper-hooded chimney.",
    }
    assert item == expected


def test_sillytavern_export_of_a_studio_entry_writes_its_fields(universe, author):
    services.lore_entry_update(
        entry=universe.lore_entries.get(entry_id="kael"),
        user=author,
        activation={"constant": True, "sticky": 4, "inclusion_group": "crew", "forced": "activate"},
    )
    world = sillytavern.export_world_info(universe, entries_of(universe))
    kael = next(e for e in world["entries"].values() if e["comment"] == "Kaël")
    assert (kael["constant"], kael["sticky"], kael["group"], kael["disable"], kael["vectorized"]) == (
        True,
        4,
        "crew",
        False,
        True,
    )
    assert kael["content"] == "@@activate\nKaël is a smuggler."
    reimported = Universe.objects.create(name="Copy", slug="copy", owner=author)
    st_import(reimported, author, world)
    copy_of_kael = reimported.lore_entries.get(entry_id="kael")
    assert activation_values(copy_of_kael) == activation_values(universe.lore_entries.get(entry_id="kael"))


# --- Character Card V3 -----------------------------------------------------------------------


def cc_import(universe, author, doc):
    book = character_card.parse_card(json.dumps(doc).encode())
    if book.card is None:  # a lorebook on its own
        return services.lore_import(universe=universe, user=author, book=book)
    return services.card_import(universe=universe, user=author, book=book)


def test_ccv3_round_trip_keeps_every_field_of_every_entry(empty_universe, author):
    original = load("ccv3_all_fields.json")
    cc_import(empty_universe, author, original)
    character = services.card_characters(universe=empty_universe)[0]
    exported = card_export.export_card(empty_universe, entries_of(empty_universe), version=3, character=character)
    by_name = {e.get("name") or e["keys"][0]: e for e in exported["data"]["character_book"]["entries"]}
    for entry in original["data"]["character_book"]["entries"]:
        assert without_axiom(by_name[entry.get("name") or entry["keys"][0]], entry) == entry
    book = {k: v for k, v in exported["data"]["character_book"].items() if k != "entries"}
    assert book == {k: v for k, v in original["data"]["character_book"].items() if k != "entries"}


def test_ccv3_decorators_and_fields_act(empty_universe, author):
    report = cc_import(empty_universe, author, load("ccv3_all_fields.json"))
    hood = empty_universe.lore_entries.get(title="The Copper Hood")
    assert hood.text == "The tavern of the Drowned Reach."
    values = activation_values(hood)
    # decorators override the SillyTavern extension fields (depth 4, role 0, scan_depth 9)
    assert (values["position"], values["depth"], values["role"], values["scan_depth"]) == (4, 5, 2, 3)
    assert values["activate_only_after"] == 2 and values["after_first_match"] == "keep"
    assert values["additional_keys"] == [["ale", "smoke"], ["night"]] and values["exclude_keys"] == ["dawn"]
    assert values["ignore_on_max_context"] is True and values["case_sensitive"] is True  # top-level field first
    assert (values["priority"], values["insertion_order"], values["probability"], values["selective_logic"]) == (
        7,
        120,
        60,
        3,
    )
    assert (values["sticky"], values["cooldown"], values["delay"], values["delay_until_recursion"]) == (4, 1, 2, 2)
    assert values["ignore_budget"] and values["vectorized"] and values["group_prioritize"]
    line = next(li for li in report.lines if li.title == "The Copper Hood")
    assert {"@@depth", "@@role", "@@additional_keys", "extensions.probability"} <= set(line.acting)
    assert "@@is_greeting 1 (not supported)" in line.kept and "extensions.automation_id" in line.kept

    dragons = empty_universe.lore_entries.get(title="drag(on|ons)")
    assert dragons.keys == ["/drag(on|ons)/", "/wyrm/"]  # use_regex keys become regex keys
    assert (dragons.secondary_keys, dragons.constant, dragons.enabled) == ([], False, False)  # CCv3: ignored
    assert dragons.activate_only_every == 3  # the @@@ fallback of an unknown decorator
    assert dragons.position == 1  # @@position after_desc
    tide = empty_universe.lore_entries.get(title="Tide")  # no name or comment: the key, not lowercased
    assert (tide.forced, tide.after_first_match, tide.delay_until_recursion) == ("activate", "stop", 1)


def test_ccv3_export_rewrites_a_changed_decorator(empty_universe, author):
    cc_import(empty_universe, author, load("ccv3_all_fields.json"))
    hood = empty_universe.lore_entries.get(title="The Copper Hood")
    services.lore_entry_update(entry=hood, user=author, activation={"depth": 2, "activate_only_after": 0})
    exported = card_export.export_book(empty_universe, entries_of(empty_universe))
    item = next(e for e in exported["entries"] if e.get("name") == "The Copper Hood")
    assert item["content"].startswith("@@depth 2\n") and "@@activate_only_after" not in item["content"]
    assert "@@is_greeting 1" in item["content"] and item["content"].endswith("The tavern of the Drowned Reach.")
    again = Universe.objects.create(name="Again", slug="again", owner=author)
    cc_import(again, author, {"spec": "chara_card_v2", "spec_version": "2.0", "data": {"character_book": exported}})
    assert activation_values(again.lore_entries.get(title="The Copper Hood")) == activation_values(
        empty_universe.lore_entries.get(title="The Copper Hood")
    )


# --- the engine on an imported book -----------------------------------------------------------


def test_imported_book_activates_as_sillytavern_would(empty_universe, author):
    st_import(empty_universe, author, load("sillytavern_all_fields.json"))
    specs = [spec_from_entry(e) for e in empty_universe.lore_entries.all()]
    result = activate(
        book=CompiledBook(specs, LoreDefaults()),
        turn=1,
        state=None,
        seed="s",
        messages=scan_messages(pending_input="ask Hesper Vale about the Copper Hood", turns=[]),
    )
    explanations = {e.title: e for e in result.explanations.values()}
    assert explanations["Hesper Vale"].included and explanations["Hesper Vale"].matched_key == "Hesper Vale"
    assert explanations["salt"].code == "disabled" and not explanations["salt"].included
    assert explanations["Gulls"].code == "no_match"


# --- Universe-as-Code TOML -------------------------------------------------------------------------


def test_toml_round_trip_carries_activation_fields(universe, author):
    kael = universe.lore_entries.get(entry_id="kael")
    services.lore_entry_update(
        entry=kael,
        user=author,
        activation={
            "secondary_keys": ["salt", "/sea+/i"],
            "selective_logic": 2,
            "case_sensitive": False,
            "scan_depth": 6,
            "sticky": 3,
            "inclusion_group": "crew",
            "additional_keys": [["a", "b"]],
            "vectorized": False,
            "role": 2,
            "forced": "dont_activate",
            "priority": -4,
        },
    )
    text = toml_io.export_universe(universe)
    assert "selective_logic = 2" in text and "vectorized = false" in text and "probability" not in text
    document = toml_io.parse_document(text)
    copy_universe, counts = services.universe_import_document(
        user=author, document=toml_io.parse_document(text.replace('slug = "test-world"', 'slug = "copy"'))
    )
    assert counts["created"] == 2
    assert activation_values(copy_universe.lore_entries.get(entry_id="kael")) == activation_values(
        universe.lore_entries.get(entry_id="kael")
    )
    assert toml_io.diff_document(universe, document).is_empty
    assert toml_io.export_universe(copy_universe).replace('"copy"', '"test-world"') == text


@pytest.mark.parametrize(
    "line, fragment",
    [
        ('secondary_keys = ["/sea(/"]', "“/sea(/” looks like a regular expression but does not compile"),
        ("probability = 140", "outside 0..100"),
        ('keys = ["/a/b/"]', "must be escaped"),
        ("selective_logic = 9", "is not one of"),
    ],
)
def test_toml_activation_errors_name_the_line_and_field(universe, line, fragment):
    text = toml_io.export_universe(universe).replace('entry_id = "kael"\n', f'entry_id = "kael"\n{line}\n', 1)
    if line.startswith("keys"):
        text = text.replace('entry_id = "kael"\n' + line + "\n", 'entry_id = "kael"\n').replace("keys = []", line, 1)
    with pytest.raises(ImportFormatError) as info:
        toml_io.parse_document(text)
    assert fragment in str(info.value) and str(info.value).startswith("line ")


def test_standalone_ccv3_lorebook_is_read(empty_universe, author):
    book = load("ccv3_all_fields.json")["data"]["character_book"]
    report = cc_import(empty_universe, author, {"spec": "lorebook_v3", "data": book})
    assert report.created == 3 and "CCv3 lorebook" in report.source
    assert empty_universe.lore_entries.get(title="The Copper Hood").depth == 5

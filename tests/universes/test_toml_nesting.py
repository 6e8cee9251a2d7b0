"""Universe-as-Code files nested too deeply: the import's error message, never a RecursionError (500)."""

from __future__ import annotations

import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from studio.universes.interchange import MAX_NESTING, ImportFormatError
from studio.universes.interchange.toml_io import export_universe, parse_document
from studio.world.models import Universe

pytestmark = pytest.mark.django_db

NESTING_MESSAGE = f"arrays and tables nest more than {MAX_NESTING} levels deep"


def with_extra_array(text: str, depth: int) -> str:
    """The exported universe with `deep = [[[...]]]` (`depth` arrays) at the top of the file."""
    return f"deep = {'[' * depth}{']' * depth}\n" + text


def fresh_copy(universe) -> str:
    return export_universe(universe).replace('slug = "test-world"', 'slug = "fresh"')


@pytest.mark.parametrize("depth", [100_000, 1_000, MAX_NESTING])
def test_a_deeply_nested_array_is_a_clear_import_error(universe, depth):
    with pytest.raises(ImportFormatError) as caught:
        parse_document(with_extra_array(fresh_copy(universe), depth).encode("utf-8"))
    assert str(caught.value) == f"Not valid TOML: {NESTING_MESSAGE}."


def test_nesting_within_the_limit_reaches_the_usual_checks(universe):
    """One level fewer is parsed, then refused as an unknown field (the ordinary validation)."""
    with pytest.raises(ImportFormatError) as caught:
        parse_document(with_extra_array(fresh_copy(universe), MAX_NESTING - 1))
    assert "unknown top-level field “deep”" in str(caught.value)


def test_deep_extensions_json_names_its_line(universe):
    text = fresh_copy(universe)
    deep = "[" * 50_000 + "]" * 50_000  # within the field's 200,000 characters
    text = text.replace('entry_id = "port-vey"', f'entry_id = "port-vey"\nextensions_json = \'{{"x": {deep}}}\'', 1)
    with pytest.raises(ImportFormatError) as caught:
        parse_document(text)
    message = str(caught.value)
    assert message.startswith("line ") and "extensions_json" in message and NESTING_MESSAGE in message


def test_extensions_json_of_ordinary_depth_still_imports(universe):
    text = fresh_copy(universe)
    value = json.dumps({"tool": {"a": {"b": [1, [2, [3]]]}}})
    text = text.replace('entry_id = "port-vey"', f"entry_id = \"port-vey\"\nextensions_json = '{value}'", 1)
    document = parse_document(text)
    assert document.slug == "fresh"


def test_the_import_page_answers_400_with_the_message_and_imports_nothing(client, author, universe):
    client.force_login(author)
    text = with_extra_array(fresh_copy(universe), 100_000)
    upload = SimpleUploadedFile("deep.toml", text.encode("utf-8"), content_type="application/toml")
    response = client.post("/universes/import/", {"file": upload})
    assert response.status_code == 400
    html = response.content.decode()
    assert f"Nothing was imported. Not valid TOML: {NESTING_MESSAGE}." in html
    assert not Universe.objects.filter(slug="fresh").exists()


# The Lore Book's JSON imports (SillyTavern world info, Character Card JSON) read JSON the same way.

DEEP_JSON = "[" * 200_000 + "]" * 200_000


@pytest.mark.parametrize(
    ("chosen", "text"),
    [
        ("sillytavern", '{"entries": {"0": {"key": ["x"], "content": "y", "extensions": {"deep": %s}}}}' % DEEP_JSON),
        ("card", '{"spec": "chara_card_v2", "data": {"name": "Kael", "extensions": {"deep": %s}}}' % DEEP_JSON),
        ("auto", '{"entries": {"0": {"key": ["x"], "content": "y", "extensions": {"deep": %s}}}}' % DEEP_JSON),
        (
            "sillytavern",
            '{"entries": {"0": {"key": ["x"], "content": "y", "extensions": {"deep": %s}}}}' % ("[" * 70 + "]" * 70),
        ),  # parses, but deeper than the limit
    ],
)
def test_a_deeply_nested_lore_file_is_the_import_error(client, author, universe, chosen, text):
    client.force_login(author)
    before = universe.lore_entries.count()
    upload = SimpleUploadedFile("deep.json", text.encode("utf-8"), content_type="application/json")
    response = client.post(
        f"/universes/{universe.slug}/exchange/import/", {"file": upload, "format": chosen, "default_kind": "concept"}
    )
    assert response.status_code == 400
    assert NESTING_MESSAGE in response.content.decode()
    assert universe.lore_entries.count() == before

"""The importers, fuzzed: any input either imports or is refused with ImportFormatError,
never another exception, and a refused or failed import writes nothing."""

from __future__ import annotations

import base64
import json
import struct
import zlib

import pytest
import tomli_w
from django.core.exceptions import ValidationError
from hypothesis import given, strategies as st

from studio.universes import services
from studio.universes.interchange import ImportFormatError
from studio.universes.interchange.character_card import parse_card
from studio.universes.interchange.sillytavern import parse_world_info
from studio.universes.interchange.toml_io import parse_document
from studio.universes.models import LoreRevision
from studio.world.models import LoreEntry, Universe, UniverseMeta


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(10**6), 10**6)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=40),
    lambda children: st.lists(children, max_size=5) | st.dictionaries(st.text(max_size=12), children, max_size=6),
    max_leaves=30,
)
# Shapes close to the real formats, so the fuzzer gets past the first type check.
world_info = st.fixed_dictionaries(
    {
        "entries": st.dictionaries(
            st.text(max_size=4),
            st.dictionaries(
                st.sampled_from(
                    [
                        "uid",
                        "key",
                        "keysecondary",
                        "comment",
                        "content",
                        "constant",
                        "selective",
                        "order",
                        "position",
                        "disable",
                        "extensions",
                    ]
                ),
                json_values,
                max_size=8,
            ),
            max_size=4,
        )
    }
)
card = st.fixed_dictionaries(
    {
        "spec": st.sampled_from(["chara_card_v2", "chara_card_v3", "other"]),
        "data": st.fixed_dictionaries(
            {
                "name": json_values,
                "character_book": st.fixed_dictionaries(
                    {
                        "entries": st.lists(
                            st.dictionaries(
                                st.sampled_from(
                                    [
                                        "keys",
                                        "content",
                                        "name",
                                        "comment",
                                        "id",
                                        "enabled",
                                        "insertion_order",
                                        "extensions",
                                        "secondary_keys",
                                    ]
                                ),
                                json_values,
                                max_size=8,
                            ),
                            max_size=4,
                        )
                    }
                ),
            }
        ),
    }
)
toml_docs = st.dictionaries(
    st.sampled_from(["universe", "meta", "missions", "lore", "extra", "format"]),
    st.dictionaries(
        st.text(min_size=1, max_size=10),
        st.text(max_size=20) | st.integers(0, 99) | st.lists(st.text(max_size=8), max_size=3),
        max_size=4,
    )
    | st.lists(
        st.dictionaries(
            st.sampled_from(["id", "title", "kind", "text", "keys", "links"]),
            st.text(max_size=20) | st.lists(st.text(max_size=8), max_size=3),
            max_size=6,
        ),
        max_size=3,
    ),
    max_size=6,
)


def png_with_text(keyword: bytes, text: bytes) -> bytes:
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    header = struct.pack(">IIBBBBB", 1, 1, 8, 0, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"tEXt", keyword + b"\x00" + text) + chunk(b"IEND", b"")
    )


def parse_or_refuse(parser, data):
    try:
        return parser(data)
    except ImportFormatError:
        return None


@given(raw=st.binary(max_size=400))
def test_any_bytes_are_parsed_or_refused_cleanly(raw):
    for parser in (parse_world_info, parse_card, parse_document):
        parse_or_refuse(parser, raw)
    parse_or_refuse(parse_card, png_with_text(b"chara", raw))


@given(doc=world_info | json_values)
def test_any_world_info_json_is_parsed_or_refused_cleanly(doc):
    parse_or_refuse(parse_world_info, json.dumps(doc).encode())


@given(doc=card | json_values, as_png=st.booleans(), keyword=st.sampled_from([b"chara", b"ccv3"]))
def test_any_card_is_parsed_or_refused_cleanly(doc, as_png, keyword):
    data = json.dumps(doc).encode()
    if as_png:
        data = png_with_text(keyword, base64.b64encode(data))
    parse_or_refuse(parse_card, data)


def db_state(universe):
    return (
        sorted(LoreEntry.objects.filter(universe=universe).values_list("entry_id", "title", "kind", "text")),
        sorted(UniverseMeta.objects.filter(universe=universe).values_list("key", "value")),
        LoreRevision.objects.count(),
        Universe.objects.count(),
    )


@pytest.mark.django_db
@given(doc=toml_docs)
def test_universe_as_code_import_is_all_or_nothing(universe, author, doc):
    before = db_state(universe)
    try:
        document = parse_document(tomli_w.dumps(doc).encode())
    except ImportFormatError:
        assert db_state(universe) == before
        return
    try:
        services.universe_import_document(user=author, document=document, universe=universe)
    except (ImportFormatError, ValidationError):
        assert db_state(universe) == before


@pytest.mark.django_db
@given(doc=world_info)
def test_lore_import_writes_everything_or_nothing(universe, author, doc):
    before = db_state(universe)
    book = parse_or_refuse(parse_world_info, json.dumps(doc).encode())
    if book is None:
        assert db_state(universe) == before
        return
    try:
        report = services.lore_import(universe=universe, user=author, book=book)
    except (ImportFormatError, ValidationError):
        assert db_state(universe) == before
        return
    created = LoreEntry.objects.filter(universe=universe).count() - len(before[0])
    assert created == report.created

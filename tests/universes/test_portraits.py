"""Portraits are decoded with a pixel limit and re-encoded; a replaced one is removed; an oversized
upload is refused before Django reads it. Before, only the PNG signature was checked: a 20000 x
20000 decompression bomb and a 2^31 x 2^31 header were kept and every member's browser decoded them."""

from __future__ import annotations

import io
import struct
import zlib
from pathlib import Path

import pytest
from django.core.exceptions import ValidationError
from django.core.files.uploadedfile import SimpleUploadedFile
from PIL import Image

from studio.universes import services
from studio.world.models import UniverseMeta
from studio.universes.portraits import MAX_PORTRAIT_PIXELS, PortraitError, portrait_clean

pytestmark = pytest.mark.django_db


def chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def png_header_only(width: int, height: int, body: bytes = b"") -> bytes:
    """A PNG whose header claims `width` x `height` (1-bit grey), with `body` as its compressed pixels."""
    header = struct.pack(">IIBBBBB", width, height, 1, 0, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", body) + chunk(b"IEND", b"")


def bomb(side: int = 20_000) -> bytes:
    """A real decompression bomb: `side` x `side` black 1-bit pixels, a few kilobytes compressed."""
    row = b"\x00" + b"\x00" * ((side + 7) // 8)
    compressor = zlib.compressobj(9)
    data = b"".join(compressor.compress(row) for _ in range(side)) + compressor.flush()
    return png_header_only(side, side, data)


def real_png(width=3, height=2, text: bytes = b"") -> bytes:
    out = io.BytesIO()
    Image.new("RGBA", (width, height), (10, 200, 30, 255)).save(out, format="PNG")
    data = out.getvalue()
    return data[:-12] + chunk(b"tEXt", text) + data[-12:] if text else data


@pytest.mark.parametrize("data", [bomb(), png_header_only(2**31 - 1, 2**31 - 1)], ids=["bomb", "huge-header"])
def test_a_picture_with_too_many_pixels_is_refused_before_decoding(data, universe):
    assert len(data) < 100_000
    with pytest.raises(PortraitError, match="pixels"):
        portrait_clean(data)
    with pytest.raises(ValidationError) as caught:
        services.persona_set(universe=universe, name="Ilya", description="", portrait=data)
    assert "pixels" in caught.value.message_dict["portrait"][0]
    assert not UniverseMeta.objects.filter(universe=universe, key__startswith="player_").exists()


def test_a_portrait_is_re_encoded_without_its_other_chunks(universe):
    original = real_png(text=b"Comment\x00<script>alert(1)</script>")
    kept = portrait_clean(original)
    assert b"<script>" not in kept and b"tEXt" not in kept
    assert (
        Image.open(io.BytesIO(kept)).convert("RGBA").tobytes()
        == Image.open(io.BytesIO(original)).convert("RGBA").tobytes()
    )
    with pytest.raises(PortraitError, match="PNG"):
        portrait_clean(b"\x89PNG\r\n\x1a\n" + b"\x00" * 40)  # the signature alone was enough before
    assert MAX_PORTRAIT_PIXELS == 4096 * 4096


def test_a_replaced_portrait_is_removed_unless_something_else_names_it(
    universe, settings, django_capture_on_commit_callbacks
):
    directory = Path(settings.VAR_DIR) / "portraits"
    with django_capture_on_commit_callbacks(execute=True):
        first = services.persona_set(universe=universe, name="Ilya", description="", portrait=real_png(3, 2))
    first_file = directory / f"{first.portrait['sha256']}.png"
    assert first_file.exists()
    with django_capture_on_commit_callbacks(execute=True):
        second = services.persona_set(universe=universe, name="Ilya", description="", portrait=real_png(4, 4))
    assert not first_file.exists() and (directory / f"{second.portrait['sha256']}.png").exists()
    # A file another universe still names stays.
    from studio.world.models import Universe

    other = Universe.objects.create(name="Other", slug="other")
    with django_capture_on_commit_callbacks(execute=True):
        services.persona_set(universe=other, name="Ilya", description="", portrait=real_png(4, 4))
        services.persona_set(universe=universe, name="Ilya", description="", remove_portrait=True)
    assert (directory / f"{second.portrait['sha256']}.png").exists()


def test_an_upload_larger_than_the_cap_is_refused_unread(client, author, universe, settings):
    """Multipart bodies had no overall cap: the whole upload was written to a temporary file first."""
    from studio import middleware

    client.force_login(author)
    settings.AXIOM_MAX_UPLOAD_BYTES = 50_000
    read = []
    original = middleware.RequestSizeLimitMiddleware.__call__

    def spy(self, request):
        response = original(self, request)
        read.append(getattr(request, "_read_started", False))
        return response

    middleware.RequestSizeLimitMiddleware.__call__ = spy
    try:
        big = SimpleUploadedFile("me.png", b"\x89PNG\r\n\x1a\n" + b"\x00" * 60_000, content_type="image/png")
        response = client.post(f"/universes/{universe.slug}/meta/persona/", {"name": "Ilya", "portrait": big})
    finally:
        middleware.RequestSizeLimitMiddleware.__call__ = original
    assert response.status_code == 413 and b"AXIOM_MAX_UPLOAD_BYTES" in response.content
    assert read == [False]
    assert not UniverseMeta.objects.filter(universe=universe, key__startswith="player_").exists()


@pytest.mark.parametrize(
    "key, value, words",
    [
        ("player_character", "{{char}}", "braces"),
        ("player_character", "A" * 121, "at most 120"),
        ("player_character", "Ilya\u0000", "ull"),  # the form's own "Null characters are not allowed", or the limit's
        ("player_description", "x" * 4001, "4,000"),
        ("player_portrait", '{"sha256": "' + "0" * 64 + '"}', "persona form"),
    ],
)
def test_the_meta_editor_keeps_the_persona_rules(author_client, universe, key, value, words):
    """The generic meta editor stored a `player_character` the persona form forbids."""
    response = author_client.post(f"/universes/{universe.slug}/meta/save/", {"key": key, "value": value})
    assert words in response.content.decode()
    assert not UniverseMeta.objects.filter(universe=universe, key=key).exists()
    with pytest.raises(ValidationError):
        services.meta_set(universe=universe, key=key, value=value)

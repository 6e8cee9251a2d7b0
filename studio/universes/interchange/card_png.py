"""A character card's PNG: the text chunks it carries, read and written without decoding the image.

Reading (`png_text_chunks`, `card_json_from_png`): tEXt, zTXt and iTXt chunks by keyword, with
the import limits (the file's size, at most MAX_PNG_CHUNKS chunks, a compressed text never
inflated past the import limit); the card JSON is the base64 text of `ccv3` (preferred) or
`chara`. Writing (`with_card_chunks`, `without_card_chunks`): the card chunks are replaced just
before IEND and every other byte is kept as it was, so an exported portrait is the imported one.
"""

from __future__ import annotations

import base64
import binascii
import json
import struct
import zlib
from typing import Any

from studio.universes.interchange import MAX_IMPORT_BYTES, ImportFormatError, check_size, nesting_error

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
CARD_CHUNK_KEYWORDS = ("ccv3", "chara")
MAX_PNG_CHUNKS = 10_000


# --- reading --------------------------------------------------------------------------------


def _inflate(data: bytes, where: str) -> bytes:
    inflater = zlib.decompressobj()
    try:
        out = inflater.decompress(data, MAX_IMPORT_BYTES + 1)
    except zlib.error as exc:
        raise ImportFormatError(f"{where}: the compressed text is corrupt ({exc}).") from exc
    if len(out) > MAX_IMPORT_BYTES or inflater.unconsumed_tail:
        raise ImportFormatError(f"{where}: the compressed text inflates past {MAX_IMPORT_BYTES:,} bytes; refused.")
    return out


def png_text_chunks(data: bytes) -> dict[str, bytes]:
    """Return the PNG's text chunks by keyword (tEXt, zTXt, iTXt), without decoding the image."""
    check_size(data, what="PNG file")
    if not data.startswith(PNG_SIGNATURE):
        raise ImportFormatError("Not a PNG file (the PNG signature is missing).")
    chunks: dict[str, bytes] = {}
    position, count = len(PNG_SIGNATURE), 0
    while position < len(data):
        if position + 8 > len(data):
            raise ImportFormatError("The PNG is truncated (a chunk header is cut off).")
        length, kind = struct.unpack(">I4s", data[position : position + 8])
        body_start, body_end = position + 8, position + 8 + length
        if body_end + 4 > len(data):
            raise ImportFormatError(f"The PNG is truncated (chunk {kind!r} claims {length:,} bytes).")
        body = data[body_start:body_end]
        count += 1
        if count > MAX_PNG_CHUNKS:
            raise ImportFormatError("The PNG has too many chunks; refused.")
        if kind in (b"tEXt", b"zTXt", b"iTXt"):
            keyword, _, rest = body.partition(b"\x00")
            name = keyword.decode("latin-1")
            where = f"PNG chunk {kind.decode()} “{name}”"
            if kind == b"tEXt":
                chunks[name] = rest
            elif kind == b"zTXt":
                chunks[name] = _inflate(rest[1:], where)
            else:
                compressed, rest = rest[0:1], rest[2:]
                _language, _, rest = rest.partition(b"\x00")
                _translated, _, text = rest.partition(b"\x00")
                chunks[name] = _inflate(text, where) if compressed == b"\x01" else text
        if kind == b"IEND":
            break
        position = body_end + 4
    return chunks


def card_json_from_png(data: bytes) -> Any:
    """Return the card JSON embedded in a PNG card (`ccv3` preferred over `chara`)."""
    chunks = png_text_chunks(data)
    for keyword in CARD_CHUNK_KEYWORDS:
        if keyword in chunks:
            raw = chunks[keyword]
            try:
                decoded = base64.b64decode(raw, validate=True)
            except (binascii.Error, ValueError) as exc:
                raise ImportFormatError(f"PNG chunk “{keyword}”: not base64 ({exc}).") from exc
            try:
                return json.loads(decoded.decode("utf-8"))
            except (UnicodeDecodeError, json.JSONDecodeError) as exc:
                raise ImportFormatError(f"PNG chunk “{keyword}”: the decoded text is not JSON ({exc}).") from exc
            except RecursionError:
                raise nesting_error(f"PNG chunk “{keyword}”") from None
    found = ", ".join(sorted(chunks)) or "none"
    raise ImportFormatError(
        f"This PNG has no character card: no “chara” or “ccv3” text chunk (text chunks found: {found})."
    )


# --- writing --------------------------------------------------------------------------------


def _chunks(png: bytes) -> list[tuple[bytes, int, int, str]]:
    """Return (type, start, end, text keyword) for every chunk, end exclusive of nothing."""
    if not png.startswith(PNG_SIGNATURE):
        raise ImportFormatError("The stored portrait is not a PNG file.")
    out, position = [], len(PNG_SIGNATURE)
    while position + 8 <= len(png):
        length, kind = struct.unpack(">I4s", png[position : position + 8])
        end = position + 12 + length
        if end > len(png):
            raise ImportFormatError("The stored portrait is a truncated PNG.")
        keyword = ""
        if kind in (b"tEXt", b"zTXt", b"iTXt"):
            keyword = png[position + 8 : position + 8 + length].partition(b"\x00")[0].decode("latin-1")
        out.append((kind, position, end, keyword))
        position = end
        if kind == b"IEND":
            break
    if not out or out[-1][0] != b"IEND":
        raise ImportFormatError("The stored portrait has no IEND chunk.")
    return out


def text_chunk(keyword: str, text: bytes) -> bytes:
    body = keyword.encode("latin-1") + b"\x00" + text
    return struct.pack(">I", len(body)) + b"tEXt" + body + struct.pack(">I", zlib.crc32(b"tEXt" + body))


def without_card_chunks(png: bytes) -> bytes:
    """Return `png` with its `chara` / `ccv3` text chunks removed, every other byte unchanged."""
    return b"".join(
        [png[: len(PNG_SIGNATURE)]]
        + [png[start:end] for kind, start, end, keyword in _chunks(png) if keyword not in CARD_CHUNK_KEYWORDS]
    )


def with_card_chunks(png: bytes, chunks: list[tuple[str, bytes]]) -> bytes:
    """Return `png` with its card chunks replaced by `chunks` (inserted just before IEND)."""
    clean = without_card_chunks(png)
    iend = _chunks(clean)[-1][1]
    return clean[:iend] + b"".join(text_chunk(k, t) for k, t in chunks) + clean[iend:]

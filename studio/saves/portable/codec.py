"""Bytes to document and back: gzip detection, size limits, strict JSON, the canonical form.

Reading refuses, each with a message that names the problem and where it is:
- a file (or, when gzip, its decompressed content) larger than `max_bytes`; the gzip stream is
  read at most `max_bytes + 1` bytes far, so a small file that inflates to gigabytes costs
  no more memory than the limit;
- damaged or truncated gzip, text that is not UTF-8, text that is not JSON (with line and
  column, and a hint when the text just stops), duplicate keys in an object, NaN / Infinity
  and numbers too large for a double, nesting deeper than the limit;
- NUL characters and lone surrogates anywhere (PostgreSQL cannot store them, and SQLite would
  take them, so refusing them on both keeps a file importable everywhere or nowhere).

Writing produces the canonical form: the top-level keys in a fixed order, the sections in
registry order, one item per line, every item's keys sorted (so nested JSON written by
either database comes out the same), UTF-8 without escapes, no timestamp of the export.
The same save therefore always gives the same bytes. Gzip output has no name and mtime 0.
"""

from __future__ import annotations

import gzip
import io
import itertools
import json
import math
import re
import zlib
from typing import Any, Iterable, Iterator

from studio.limits import strict_json_hooks
from studio.saves.portable.registry import LIMITS, PortableLimits, Problem, SaveFileError, SaveFileTooLarge

FORMAT = "axiom-save"
FORMAT_VERSION = 1
GZIP_MAGIC = b"\x1f\x8b"
# What in a JSON text can decode to a value the databases refuse: a \u0000 escape, a
# surrogate escape (lone or paired), an exponent of three digits (1e400 reads as infinity).
# A file without any of these, and not nested too deeply, skips the walk over every value.
SUSPICIOUS = re.compile(r"\\u0000|\\u[dD][89a-fA-F][0-9a-fA-F]{2}|[eE]\+?[0-9]{3}")
JSON_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"')
NOT_A_BRACKET = re.compile(r"[^\[\]{}]")


def _refuse(location: str, message: str) -> SaveFileError:
    return SaveFileError([Problem(location, message)])


def decompress(data: bytes, *, max_bytes: int) -> bytes:
    """Return `data` itself, or its gunzipped content when it starts with the gzip magic."""
    if len(data) > max_bytes:
        raise SaveFileTooLarge(
            [Problem("", f"the file is {len(data)} bytes; the limit is {max_bytes} bytes (AXIOM_SAVE_FILE_MAX_BYTES)")]
        )
    if not data.startswith(GZIP_MAGIC):
        return data
    try:
        with gzip.GzipFile(fileobj=io.BytesIO(data), mode="rb") as stream:
            raw = stream.read(max_bytes + 1)
    except EOFError:
        raise _refuse("", "the gzip data ends early: the file is truncated") from None
    except (OSError, zlib.error) as exc:
        raise _refuse("", f"the gzip data is damaged ({exc})") from None
    if len(raw) > max_bytes:
        raise SaveFileTooLarge(
            [
                Problem(
                    "",
                    f"the gzip file decompresses to more than {max_bytes} bytes (AXIOM_SAVE_FILE_MAX_BYTES); nothing was read past that",
                )
            ]
        )
    return raw


def parse(raw: bytes, *, limits: PortableLimits = LIMITS) -> Any:
    """Parse UTF-8 JSON strictly; raise SaveFileError naming the problem and its place."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _refuse("", f"the file is not UTF-8 text (byte {exc.start} is invalid); is it a save file?") from None
    text = text.removeprefix("\ufeff")
    if not text.strip():
        raise _refuse("", "the file is empty")
    try:
        document = json.loads(text, **strict_json_hooks(finite=False))  # infinities: _check_values, with places
    except json.JSONDecodeError as exc:
        # A string that never closes ran into the end of the text, as does a cut-off document.
        truncated = exc.pos >= len(text.rstrip()) or exc.msg.startswith("Unterminated string")
        hint = " (the file ends early: it looks truncated)" if truncated else ""
        raise _refuse(f"line {exc.lineno} column {exc.colno}", f"not valid JSON: {exc.msg}{hint}") from None
    except RecursionError:
        raise _refuse("", f"the JSON is nested too deeply (at most {limits.max_depth} levels)") from None
    except ValueError as exc:  # duplicate keys, NaN / Infinity, integers with too many digits
        raise _refuse("", f"not valid JSON: {exc}") from None
    if SUSPICIOUS.search(text) or _nesting(text) > limits.max_depth:
        _check_values(document, limits)
    return document


def _nesting(text: str) -> int:
    """Return how deeply the containers of a (valid) JSON text nest."""
    brackets = NOT_A_BRACKET.sub("", JSON_STRING.sub("", text))
    return max(itertools.accumulate(1 if char in "[{" else -1 for char in brackets), default=0)


def _path(parts: tuple) -> str:
    out = ""
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _check_values(document: Any, limits: PortableLimits) -> None:
    """Refuse NUL, lone surrogates, non-finite numbers and deep nesting anywhere."""
    problems: list[Problem] = []

    def bad_string(value: str) -> str:
        if "\x00" in value:
            return "contains a NUL character, which cannot be stored"
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return "contains a lone UTF-16 surrogate, which is not valid Unicode"
        return ""

    stack: list[tuple[Any, tuple, int]] = [(document, (), 0)]
    while stack and len(problems) < 10:
        value, path, depth = stack.pop()
        if depth > limits.max_depth:
            problems.append(Problem(_path(path), f"is nested more than {limits.max_depth} levels deep"))
            continue
        if isinstance(value, str):
            message = bad_string(value)
            if message:
                problems.append(Problem(_path(path), message))
        elif isinstance(value, float):
            if not math.isfinite(value):
                problems.append(Problem(_path(path), "is a number too large for JSON (it reads as infinity)"))
        elif isinstance(value, dict):
            for key, child in value.items():
                message = bad_string(key)
                if message:
                    problems.append(Problem(_path(path), f"has a key that {message}"))
                stack.append((child, path + (key,), depth + 1))
        elif isinstance(value, list):
            for index, child in enumerate(value):
                stack.append((child, path + (index,), depth + 1))
    if problems:
        raise SaveFileError(problems)


def read_save_file(data: bytes, *, max_bytes: int, limits: PortableLimits = LIMITS) -> Any:
    """Return the parsed document of a save file (plain or gzip JSON); nothing is checked yet."""
    return parse(decompress(data, max_bytes=max_bytes), limits=limits)


# -- writing ---------------------------------------------------------------------------------


def dumps(value: Any) -> str:
    """Return the canonical JSON of one value: sorted keys, no spaces, UTF-8 characters as is."""
    return json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":"), allow_nan=False)


def encode(universe: dict, save: dict, sections: Iterable[tuple[str, int, bool, Iterable[dict]]]) -> Iterator[str]:
    """Yield the canonical text of a save file, piece by piece (items are never all in memory).

    `sections` yields (name, version, optional, items) in registry order.
    """
    yield f'{{"format":{dumps(FORMAT)},"format_version":{FORMAT_VERSION},\n'
    yield f'"universe":{dumps(universe)},\n'
    yield f'"save":{dumps(save)},\n'
    yield '"sections":{'
    for index, (name, version, optional, items) in enumerate(sections):
        yield ("," if index else "") + f'\n{dumps(name)}:{{"version":{version},"optional":{dumps(optional)},"items":['
        separator = "\n"
        for item in items:
            yield separator + dumps(item)
            separator = ",\n"
        yield "]}"
    yield "\n}}\n"


def encode_document(document: dict) -> str:
    """Return the canonical text of a parsed save document (the inverse of `parse`)."""
    sections = [(name, body["version"], body["optional"], body["items"]) for name, body in document["sections"].items()]
    return "".join(encode(document["universe"], document["save"], sections))


def gzip_chunks(chunks: Iterable[bytes]) -> Iterator[bytes]:
    """Gzip a byte stream deterministically (no file name, mtime 0)."""
    compressor = zlib.compressobj(6, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    for chunk in chunks:
        out = compressor.compress(chunk)
        if out:
            yield out
    yield compressor.flush()

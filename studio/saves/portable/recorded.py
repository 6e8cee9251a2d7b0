"""How a save file writes what play recorded (a snapshot's memory context, a recorded query): each
value against what the file already holds, so a long chat's file grows with what is new.

Version 2 of the `narrator_snapshots` and `recorded_queries` sections. One `RecordCodec` reads
(or writes) a whole section in file order and keeps, across its items, tables the file builds
as it goes: the **last version of every context item by its `ref`** (the same chunk, turn or
entry, in whatever snapshot it last was), **strings** (each string of a ref, each string a
list of strings or a dict's added or removed keys wrote out), **templates** and **columns**
(below), and for each dict place (its keys from the root, list positions left out) the **last
value of every key** there. A value is written against the previous item's at the same place:

- a dict: only what changed (`{}`: nothing), `"$-"` the keys removed, `"$+"` those added, each
  `[key]` (its last value at this place) or `[key, value]`; a key is a string or the number of
  one in the table; a dict whose own keys start with `$`: `{"$v": value}`, as it is;
- a list or string equal to the previous one: `{"$s": 1}`; a list of strings: `{"$I": [...]}`,
  each a number in the string table or the string (which joins it), or when none is in the
  table the list as it is (each joins it); a long string copied from
  the prompts or the chat: `{"$d": ops}` (`narrator/snapshots.delta_encode`);
- a list of context items (dicts with a `ref`): `{"$items": [entries]}`, each
  - a number: the item of that ref, as its last version;
  - `[n, value, ...]`: the item of ref n, its last version with the values of the columns;
  - `{"$c": [paths], "$f": [...], "$p": [...], "$t": {...}}` (or `{"$h": n}`, columns given
    before): the columns of the rows after it. `$c` the paths (`key` or `key.subkey`) a row
    gives, `$f` those given as the shortest decimal of a 32-bit float (a vector distance), `$p`
    those whose value is the one the previous snapshot's item at the same place in the same
    layer had (a rank, the score it gives), `$t` the strings made from the item's own values;
  - `{"$n": dict, "$t": {...}}`: a new ref, written against the entry before it (with the
    `$p` values of the previous snapshot's item at the next place of that entry's layer), its
    strings at the `$t` paths made by templates;
  - `{"$r": n, "$u": dict}`: the item of ref n, written against its last version.
  A template (a list of literal strings and `[path]` or `[path, decimals]`, or the number of
  one the file gave before) makes a string from the item's own numbers and strings: `"rank 3
  (distance 0.125)"` from `why.final_rank` and `why.semantic_distance`. So a cut candidate
  whose rank and score moved costs a few numbers; its text, reason and cut are in the file
  once, with the item its ref points to.

Every row is checked to rebuild its item before it is written, and `VerifiedWriter` reads
every value back with a second codec as an import will; a value that would not come back
exactly is written whole (`{"$v": ...}`) and both start again with empty tables.
`decode` raises ValueError for a marker that does not fit.

This module holds the format and `RecordCodec`, which puts together the tables and markers
(recorded_tables.py), the writer (recorded_encode.py) and the reader (recorded_decode.py);
the pure pieces both use are in recorded_items.py.
"""

from __future__ import annotations

import json
import logging

from studio.saves.narrator.snapshots import Reference
from studio.saves.portable.recorded_decode import RecordReading
from studio.saves.portable.recorded_encode import RecordWriting
from studio.saves.portable.recorded_items import canonical, same
from studio.saves.portable.recorded_tables import VERBATIM

logger = logging.getLogger(__name__)


class RecordCodec(RecordWriting, RecordReading):
    """Writes (`encode`) or reads (`decode`) the recorded values of one section, in file order."""


class VerifiedWriter:
    """Writes a section's values with one codec and reads each back with another, as an import will.

    A value that would read back as anything else is written whole (`{"$v": value}`), and both
    codecs start again empty, as a reader does at a value written whole (`RecordCodec.reset_at`)."""

    def __init__(self):
        self.writer, self.reader = RecordCodec(), RecordCodec()

    def write(self, values: list, previous: list, reference: Reference, reference_text: str) -> list:
        """Encode the values of one item (each against its previous, in order); return them encoded."""
        if not (isinstance(values[0], dict) and any(key.startswith("$") for key in values[0])):
            encoded = [self.writer.encode(value, before, reference) for value, before in zip(values, previous)]
            try:
                back = [
                    self.reader.decode(json.loads(canonical(value)), before, reference_text)
                    for value, before in zip(encoded, previous)
                ]
            except ValueError:
                back = None
            if back is not None and all(same(x, y) for x, y in zip(back, values)):
                return encoded
            logger.warning("A recorded value would not read back from the save file as written: written whole")
        self.writer, self.reader = RecordCodec(), RecordCodec()
        return [{VERBATIM: value} for value in values]

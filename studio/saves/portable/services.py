"""Export a save as one portable file, and import such a file as a new save.

`save_export` reads the save under its row lock (appends and living-memory commits take the
same lock, so the file is one consistent moment of the save) into a spooled temporary file,
then releases the lock; the view streams that file out. `save_import` reads and checks the
whole file first (`save_file_check`) and raises SaveFileError listing every problem before
anything is written; then one transaction creates a new save (a new save_id) and writes every
section, and the save's lore sync and turn embeddings are queued as jobs that run after
commit. Vector chunks are never in the file: the import re-derives them.

The round trip is exact: importing a file and exporting the new save gives the same bytes
(the save's name aside, when the import renames it), on SQLite and PostgreSQL alike.
"""

from __future__ import annotations

import hashlib
import tempfile
from functools import partial
from dataclasses import dataclass, field
from datetime import datetime
from typing import IO, Any

from django.conf import settings
from django.db import transaction
from django.utils.text import slugify

from studio.memory import jobs
from studio.memory.models import Job, JobKind, JobStatus
from studio.world.models import LoreEntry, MemoryMode, Save, Universe
from studio.saves.portable import codec
from studio.saves.portable.sections import rows
from studio.saves.portable.registry import (
    INVALID,
    LIMITS,
    Checker,
    CheckContext,
    ExportContext,
    ImportContext,
    PortableLimits,
    Problem,
    SaveFileError,
    SaveSection,
    TooManyProblems,
    registered_sections,
)

SPOOL_BYTES = 8 * 1024 * 1024  # larger exports go to a temporary file on disk
TOP_LEVEL_KEYS = ("format", "format_version", "universe", "save", "sections")


def max_file_bytes() -> int:
    """Return the size limit of a save file, compressed or not (AXIOM_SAVE_FILE_MAX_BYTES)."""
    return int(getattr(settings, "AXIOM_SAVE_FILE_MAX_BYTES", 16 * 1024 * 1024))


def universe_lore_hash(*, universe: Universe) -> str:
    """Return a hash of the universe's Lore Book content (entries, keys, links, extensions).

    Two universes with the same lore give the same hash whatever their ids or edit times,
    so an import can tell whether the save meets the Lore Book it was played with.
    """
    entries = []
    for entry in LoreEntry.objects.filter(universe=universe).prefetch_related("links").order_by("entry_id"):
        entries.append(
            [
                entry.entry_id,
                entry.title,
                entry.kind,
                entry.text,
                list(entry.keys or []),
                sorted(link.entry_id for link in entry.links.all()),
                entry.extensions or {},
            ]
        )
    return "sha256:" + hashlib.sha256(codec.dumps(entries).encode("utf-8")).hexdigest()


# -- export ----------------------------------------------------------------------------------


@dataclass
class SaveExport:
    """An exported save file: its name, content type, size, and the bytes (at position 0)."""

    filename: str
    content_type: str
    size: int
    file: IO[bytes]

    def read(self) -> bytes:
        self.file.seek(0)
        data = self.file.read()
        self.file.seek(0)
        return data


def export_filename(game_save: Save, *, compress: bool = False) -> str:
    base = slugify(game_save.name)[:60] or "save"
    return f"{base}-turn-{game_save.current_turn}.axiom-save.json" + (".gz" if compress else "")


def save_export(*, game_save: Save, compress: bool = False) -> SaveExport:
    """Write the save's file (gzip when `compress`) and return it, ready to stream.

    Deterministic: the same save gives the same bytes (no export time is written; the file's
    one time of the save is its last activity).
    """
    spool = tempfile.SpooledTemporaryFile(max_size=SPOOL_BYTES)
    with transaction.atomic():
        locked = Save.objects.select_for_update().select_related("universe").get(pk=game_save.pk)
        universe = {
            "slug": locked.universe.slug,
            "name": locked.universe.name,
            "lore_hash": universe_lore_hash(universe=locked.universe),
        }
        header = {
            "name": locked.name,
            "memory_mode": locked.memory_mode,
            "beliefs_enabled": locked.beliefs_enabled,
            "meta": locked.meta or {},
            "current_turn": locked.current_turn,
            "timeline_generation": locked.timeline_generation,
            "last_activity_at": rows.iso(locked.last_activity_at),
        }
        ctx = ExportContext(game_save=locked)
        parts = (
            (section.name, section.version, section.optional, section.export(ctx)) for section in registered_sections()
        )
        chunks = (text.encode("utf-8") for text in codec.encode(universe, header, parts))
        if compress:
            chunks = codec.gzip_chunks(chunks)
        size = 0
        for chunk in chunks:
            spool.write(chunk)
            size += len(chunk)
    spool.seek(0)
    return SaveExport(
        filename=export_filename(locked, compress=compress),
        content_type="application/gzip" if compress else "application/json",
        size=size,
        file=spool,
    )


# -- checking --------------------------------------------------------------------------------


@dataclass
class CheckedSave:
    """A save file that passed every check: its header and each known section's items."""

    universe: dict[str, str]
    save: dict[str, Any]
    sections: list[tuple[SaveSection, list[dict]]]
    warnings: list[str] = field(default_factory=list)

    @property
    def counts(self) -> dict[str, int]:
        return {section.name: len(items) for section, items in self.sections}


def _check_header(document: Any, c: Checker) -> tuple[dict, dict] | None:
    if not isinstance(document, dict):
        c.add("", 'a save file is a JSON object with format "axiom-save"; this is a JSON ' + type(document).__name__)
        return None
    file_format = document.get("format")
    if file_format != codec.FORMAT:
        c.add("format", f'is {repr(file_format)[:40]}, not "axiom-save": this is not an Axiom save file')
        return None
    version = document.get("format_version")
    if isinstance(version, bool) or not isinstance(version, int):
        c.add(
            "format_version",
            f"must be a whole number (this studio reads version {codec.FORMAT_VERSION}), not {repr(version)[:40]}",
        )
        return None
    if version != codec.FORMAT_VERSION:
        newer = "a newer" if version > codec.FORMAT_VERSION else "an older"
        c.add(
            "format_version",
            f"is {version}: the file comes from {newer} studio; this one reads version {codec.FORMAT_VERSION} only",
        )
        return None
    for key in document:
        if key not in TOP_LEVEL_KEYS:
            c.add(key[:60], "is not a top-level field of a save file (expected: " + ", ".join(TOP_LEVEL_KEYS) + ")")
    universe = c.record(
        document.get("universe"),
        "universe",
        {
            "slug": lambda v, loc: c.text(v, loc, max_length=80),
            "name": lambda v, loc: c.text(v, loc, max_length=200),
            "lore_hash": lambda v, loc: c.text(v, loc, max_length=100),
        },
    )
    limits = c.limits
    save = c.record(
        document.get("save"),
        "save",
        {
            "name": lambda v, loc: c.limited(v, loc, "save.name"),
            "memory_mode": lambda v, loc: c.choice(v, loc, MemoryMode.values),
            "beliefs_enabled": c.boolean,
            "meta": c.mapping,
            "current_turn": lambda v, loc: c.integer(v, loc, maximum=limits.max_turns),
            "timeline_generation": c.integer,
            "last_activity_at": c.timestamp,
        },
    )
    if universe is None or save is None or len(save) < 7 or len(universe) < 3:
        return None
    return universe, save


def save_file_check(*, document: Any, limits: PortableLimits = LIMITS) -> CheckedSave:
    """Check a parsed save file completely; return it cleaned, or raise SaveFileError.

    Checks the format name and version, the header, that every section is known (or marked
    optional), each section's items (types, sizes, ids unique, turns 1..N in order, every
    turn reference within the save, every reference to a fact, belief or job resolvable).
    Reports up to `limits.max_problems` problems, each with its JSON location.
    """
    c = Checker(limits)
    try:
        return _check(document, c)
    except TooManyProblems:
        c.problems.append(Problem("", f"stopped after {limits.max_problems} problems"))
        raise SaveFileError(c.problems) from None


def _check(document: Any, c: Checker) -> CheckedSave:
    header = _check_header(document, c)
    if header is None:
        c.problems = c.problems or [Problem("", "the save header is not valid")]
        raise SaveFileError(c.problems)
    universe, save = header
    ctx = CheckContext(checker=c, current_turn=save["current_turn"], timeline_generation=save["timeline_generation"])
    bodies = c.mapping(document.get("sections"), "sections")
    if bodies is INVALID:
        raise SaveFileError(c.problems)
    known = {section.name: section for section in registered_sections()}
    warnings: list[str] = []
    for name, body in bodies.items():
        if name in known:
            continue
        if isinstance(body, dict) and body.get("optional") is True:
            warnings.append(
                f"The file's section “{name}” is unknown to this studio and marked optional; it was left out."
            )
        else:
            c.add(
                f"sections.{name[:60]}",
                "is a section this studio does not know (from a newer studio, or an app not installed here), and it "
                "is not marked optional, so importing the file would lose it",
            )
    checked: list[tuple[SaveSection, list[dict]]] = []
    for section in registered_sections():
        where = f"sections.{section.name}"
        if section.name not in bodies:
            if section.required:
                c.add(where, "is missing")
            checked.append((section, []))
            continue
        envelope = c.record(
            bodies[section.name],
            where,
            {
                "version": c.integer,
                "optional": c.boolean,
                "items": lambda v, loc: c.array(v, loc, max_items=c.limits.max_items),
            },
        )
        if envelope is None or "version" not in envelope or "items" not in envelope:
            continue
        if envelope["version"] != section.version and envelope["version"] not in section.reads:
            readable = ", ".join(str(v) for v in sorted({section.version, *section.reads}))
            c.add(
                f"{where}.version",
                f"is {envelope['version']}; this studio reads version{'s' if section.reads else ''} {readable} of this section",
            )
            continue
        ctx.version = envelope["version"]
        checked.append((section, section.check(envelope["items"], ctx, f"{where}.items")))
    if c.problems:
        raise SaveFileError(c.problems)
    return CheckedSave(universe=universe, save=save, sections=checked, warnings=warnings + ctx.warnings)


def save_file_read(*, data: bytes, limits: PortableLimits = LIMITS) -> CheckedSave:
    """Read (gunzip, parse) and check a save file; raise SaveFileError naming every problem."""
    document = codec.read_save_file(data, max_bytes=max_file_bytes(), limits=limits)
    return save_file_check(document=document, limits=limits)


# -- import ----------------------------------------------------------------------------------


@dataclass
class SaveImportResult:
    game_save: Save
    counts: dict[str, int]
    warnings: list[str]
    jobs_queued: int


def universe_warnings(*, checked: CheckedSave, universe: Universe) -> list[str]:
    """Say how the target universe differs from the one the save was exported from."""
    reference = checked.universe
    warnings = []
    if reference["slug"] != universe.slug:
        warnings.append(
            f"The save was exported from the universe “{reference['name']}” ({reference['slug']}) and is imported "
            f"into “{universe.name}” ({universe.slug})."
        )
    if reference["lore_hash"] != universe_lore_hash(universe=universe):
        warnings.append(
            f"The Lore Book of “{universe.name}” is not the one this save was played with: lore search and "
            "activation use the current entries."
        )
    return warnings


def save_import(
    *, universe: Universe, data: bytes | None = None, checked: CheckedSave | None = None, name: str = ""
) -> SaveImportResult:
    """Create a new save in `universe` from a save file; return it with counts and warnings.

    Pass the file's bytes as `data`, or the result of `save_file_read` as `checked` (a view
    that had to read the file to pick the universe). Raise SaveFileError (nothing written)
    when the file is malformed. `name` replaces the file's save name when given. The save's
    lore sync and one embedding job per turn are queued in the same transaction and start
    when it commits.
    """
    if (data is None) == (checked is None):
        raise ValueError("pass exactly one of data= or checked=")
    if checked is None:
        checked = save_file_read(data=data)
    warnings = universe_warnings(checked=checked, universe=universe) + checked.warnings
    header = checked.save
    with transaction.atomic():
        game_save = Save.objects.create(
            universe=universe,
            name=(name or "").strip()[:200] or header["name"],
            memory_mode=header["memory_mode"],
            beliefs_enabled=header["beliefs_enabled"],
            meta=header["meta"],
            current_turn=header["current_turn"],
            timeline_generation=header["timeline_generation"],
        )
        last_activity: datetime = header["last_activity_at"]
        Save.objects.filter(pk=game_save.pk).update(last_activity_at=last_activity)
        game_save.last_activity_at = last_activity
        ctx = ImportContext(game_save=game_save)
        counts = {section.name: section.load(items, ctx) for section, items in checked.sections}
        queued = _queue_rederivation(game_save)
    return SaveImportResult(game_save=game_save, counts=counts, warnings=warnings, jobs_queued=queued)


def _queue_rederivation(game_save: Save) -> int:
    """Queue the save's lore sync and its turns' embeddings (marked, so exports leave them out).

    The jobs are rows created in the import's transaction and handed to the runner when it
    commits. The runner drains a save's queue once started, so one hand-off per batch of
    turns is enough; the rest wait in the queue as rows.
    """
    marker = {rows.REDERIVE_MARKER: "save_import"}
    common = {
        "universe_id": game_save.universe_id,
        "game_save_id": game_save.pk,
        "timeline_generation": game_save.timeline_generation,
        "progress": "queued",
    }
    jobs.job_create(kind=JobKind.SYNC_LORE, payload=dict(marker), **common)
    rows.insert_rows(
        Job,
        (
            {"kind": JobKind.EMBED_TURN, "turn_id": turn, "payload": marker, **common}
            for turn in range(1, game_save.current_turn + 1)
        ),
    )
    # The imported jobs are all finished, so the save's queued jobs are the ones just made.
    embeds = list(
        Job.objects.filter(game_save_id=game_save.pk, kind=JobKind.EMBED_TURN, status=JobStatus.QUEUED)
        .order_by("pk")
        .values_list("pk", flat=True)
    )
    for job_id in embeds[:: max(1, jobs.batch_size())]:
        transaction.on_commit(partial(jobs.send, job_id))
    return 1 + len(embeds)

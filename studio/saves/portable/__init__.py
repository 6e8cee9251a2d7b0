"""A save as one portable file ("axiom-save", format version 1), and back.

The file is one JSON document (optionally gzip, recognised by its magic bytes)::

    {"format": "axiom-save", "format_version": 1,
     "universe": {"slug", "name", "lore_hash"},
     "save": {"name", "memory_mode", "beliefs_enabled", "meta", "current_turn",
              "timeline_generation", "last_activity_at"},
     "sections": {"turns": {"version": 1, "optional": false, "items": [...]}, "facts": ..., ...}}

- Ids are the file's own: turns are 1..current turn, facts, beliefs, mental models and jobs
  are numbered 1..n in a stable order and refer to each other by those numbers. No database
  id, save id or export time is in the file, so exporting a save twice gives the same bytes
  and the export of an imported save is the file it came from.
- Vector chunks are not in the file; an import queues the jobs that rebuild them.
- Sections come from a registry (`register_section`); see `registry.py` for how another app
  adds its own (narrator snapshots, lore activation state, chapters, presence and reveals,
  play settings) without editing this package.
- Every problem with a file is reported before anything is written (SaveFileError lists
  them with their JSON locations); the import itself is one transaction.

Services: `save_export`, `save_import`; readers: `save_file_read`, `save_file_check`.
"""

from studio.saves.portable import sections as _sections  # noqa: F401  (registers the core sections)
from studio.saves.portable.codec import FORMAT, FORMAT_VERSION
from studio.saves.portable.registry import (
    LIMITS,
    CheckContext,
    ExportContext,
    ImportContext,
    PortableLimits,
    Problem,
    SaveFileError,
    SaveFileTooLarge,
    SaveSection,
    register_section,
    registered_sections,
    unregister_section,
)
from studio.saves.portable.services import (
    CheckedSave,
    SaveExport,
    SaveImportResult,
    max_file_bytes,
    save_export,
    save_file_check,
    save_file_read,
    save_import,
    universe_lore_hash,
)

__all__ = [
    "FORMAT",
    "FORMAT_VERSION",
    "LIMITS",
    "CheckContext",
    "CheckedSave",
    "ExportContext",
    "ImportContext",
    "PortableLimits",
    "Problem",
    "SaveExport",
    "SaveFileError",
    "SaveFileTooLarge",
    "SaveImportResult",
    "SaveSection",
    "max_file_bytes",
    "register_section",
    "registered_sections",
    "save_export",
    "save_file_check",
    "save_file_read",
    "save_import",
    "universe_lore_hash",
    "unregister_section",
]

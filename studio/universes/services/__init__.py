"""Writes for universes: universes, Universe_Meta, the Lore Book, missions and imports.

One package, modules by subject: `universes` (universes, meta, missions), `lore` (entries
one at a time, revisions, the embedding sync), `lore_bulk` (bulk edits, the imports' bulk
create), `lore_rows` (what every writer of an entry records: the revision's snapshot, the
revision, the counts), `lore_links` (links to entries not written yet), `lore_import` (lore
books from Character Cards and SillyTavern, Universe-as-Code imports), `persona` (the
player's persona in meta), `opening` (first message, alternate greetings, scenario) and
`card_import` (a Character Card's Character entry, portrait and book). Callers import from
here.

Every function that touches more than one row runs in one `transaction.atomic()` block.
Work outside the database (queueing the lore embedding job, deleting vector chunks) is
scheduled with `transaction.on_commit`, so a rolled-back write leaves nothing behind.
"""

from __future__ import annotations

from studio.universes.services.universes import (  # noqa: F401
    BELIEF_MISSION,
    BELIEF_MISSIONS,
    CHARACTER_CARD_META,
    CHARACTER_BOOK_META,
    SILLYTAVERN_META,
    JSON_OBJECT_META_KEYS,
    LORE_INT_META,
    LORE_BOOL_META,
    RESERVED_ENTRY_IDS,
    RESERVED_UNIVERSE_SLUGS,
    SLUG_RE,
    META_KEY_RE,
    MAX_MISSION_CHARS,
    MAX_META_VALUE_CHARS,
    universe_create,
    universe_rename,
    universe_delete,
    meta_validate,
    missions_validate,
    missions_from_text,
    meta_set,
    meta_delete,
    missions_set,
)
from studio.universes.services.lore_rows import lore_entry_snapshot  # noqa: F401
from studio.universes.services.lore import (  # noqa: F401
    LoreEditConflict,
    schedule_lore_sync,
    lore_entry_id_for,
    lore_entry_create,
    lore_entry_update,
    lore_entry_delete,
    lore_entry_restore,
    _sync_lore_now,
)
from studio.universes.services.lore_bulk import (  # noqa: F401
    lore_bulk_delete,
    lore_bulk_set_kind,
    lore_bulk_set_activation,
)
from studio.universes.services.lore_import import (  # noqa: F401
    ImportLine,
    ImportReport,
    lore_import,
    lore_import_title_merges,
    universe_import_document,
    lore_extension,
)
from studio.universes.services.persona import (  # noqa: F401
    MAX_PORTRAIT_BYTES,
    persona_of,
    persona_set,
    persona_settle,
    persona_validate,
)
from studio.universes.services.opening import opening_of, opening_set  # noqa: F401
from studio.universes.services.card_import import (  # noqa: F401
    card_import,
    card_import_title_merges,
    card_character_for,
    card_characters,
)

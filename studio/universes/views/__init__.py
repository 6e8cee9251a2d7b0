"""Authoring pages: universes, metadata, Lore Book, missions, import and export.

Every view checks access itself: a universe the user cannot see is a 404, a write by a
user who is not an author is a 403 (see `common.py`).
"""

from studio.universes.views.interchange import (  # noqa: F401
    export_card,
    export_card_png,
    export_sillytavern,
    export_toml,
    exchange_page,
    lore_import,
    toml_import,
)
from studio.universes.views.lore import (  # noqa: F401
    lore_bulk,
    lore_create,
    lore_delete,
    lore_deleted,
    lore_detail,
    lore_edit,
    lore_history,
    lore_list,
    lore_restore,
    lore_row,
    lore_status,
)
from studio.universes.views.lore_tools import lore_health_page, lore_tester  # noqa: F401
from studio.universes.views.meta import (  # noqa: F401
    meta_delete,
    meta_edit,
    meta_page,
    meta_save,
    persona_portrait,
    persona_save,
    opening_save,
)
from studio.universes.views.missions import (  # noqa: F401
    missions_page,
    missions_table,
    missions_text,
    missions_universe,
)
from studio.universes.views.universes import (  # noqa: F401
    universe_create,
    universe_delete,
    universe_detail,
    universe_list,
    universe_rename,
)

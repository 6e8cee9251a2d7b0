"""The tabs of a save's pages, grouped: Play, Story, Memory, Tools (one registry).

Every save page (the Console, the timeline, the inspector's pages) passes its `tab` key to
the header (`saves/_save_header.html`), which draws one row of the four groups and, under
the active group, a row of its pages (`{% save_tabs %}`, `saves/templatetags/save_tabs.py`).
A new page of a save is one `SaveTab` here; a key no tab has shows the Play group active.
Without JavaScript both rows are plain links; on a phone they take two short rows instead
of the four rows twelve tabs wrapped into.
"""

from __future__ import annotations

from dataclasses import dataclass

PLAY, STORY, MEMORY, TOOLS = "Play", "Story", "Memory", "Tools"
GROUPS = (PLAY, STORY, MEMORY, TOOLS)


@dataclass(frozen=True)
class SaveTab:
    key: str  # what a page passes as `tab` (save_page_context)
    label: str
    url_name: str  # reversed with the save's id
    group: str
    playtesters_only: bool = False


SAVE_TABS: tuple[SaveTab, ...] = (
    SaveTab("console", "Play", "saves:detail", PLAY),
    SaveTab("timeline", "Timeline", "saves:timeline", STORY),
    SaveTab("chapters", "Chapters", "saves:chapters", STORY),
    SaveTab("rewind", "Rewind & fork", "saves:rewind", STORY, playtesters_only=True),
    SaveTab("playground", "Search", "memory:playground", MEMORY),
    SaveTab("context", "Context", "memory:context", MEMORY),
    SaveTab("facts", "Facts", "memory:facts", MEMORY),
    SaveTab("beliefs", "Beliefs", "memory:beliefs", MEMORY),
    SaveTab("models", "Mental models", "memory:mental_models", MEMORY),
    SaveTab("knowledge", "Who knows what", "memory:knowledge", MEMORY),
    SaveTab("replay", "Lore replay", "memory:replay", TOOLS),
    SaveTab("jobs", "Jobs", "memory:jobs", TOOLS),
)


def group_of(tab_key: str) -> str:
    """Return the group a page's tab belongs to (Play for a page no tab names)."""
    return next((tab.group for tab in SAVE_TABS if tab.key == tab_key), PLAY)


def tabs_for(*, can_playtest: bool) -> list[SaveTab]:
    """Return the tabs a user sees (Rewind & fork only for playtesters)."""
    return [tab for tab in SAVE_TABS if can_playtest or not tab.playtesters_only]

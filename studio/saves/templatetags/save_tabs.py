"""`{% save_tabs %}`: the save header's tabs, grouped (`studio/saves/tabs.py`)."""

from __future__ import annotations

from django import template
from django.urls import reverse

from studio.saves.tabs import GROUPS, group_of, tabs_for

register = template.Library()


@register.inclusion_tag("saves/_save_tabs.html", takes_context=True)
def save_tabs(context):
    """Render the four groups (each linking to its first page) and the active group's pages."""
    game_save, key = context["save"], context.get("tab", "")
    active = group_of(key)
    tabs = [
        (tab, reverse(tab.url_name, args=[game_save.save_id]))
        for tab in tabs_for(can_playtest=context.get("can_playtest", False))
    ]
    groups = []
    for group in GROUPS:
        pages = [{"label": tab.label, "url": url, "current": tab.key == key} for tab, url in tabs if tab.group == group]
        if pages:
            groups.append({"label": group, "url": pages[0]["url"], "active": group == active, "pages": pages})
    pages = next((g["pages"] for g in groups if g["active"]), [])
    return {"groups": groups, "pages": pages if len(pages) > 1 else [], "active": active}

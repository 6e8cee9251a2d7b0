"""`{% demo_recording_of save as recording %}`: which model recorded the demo living save, and when."""

from __future__ import annotations

from django import template

from studio.saves.demo_chapters import chapters_recording_for
from studio.saves.demo_living import recording_for

register = template.Library()


@register.simple_tag
def demo_recording_of(game_save):
    """Return the recording summary of the demo living save, or of the demo save's chapters (None elsewhere)."""
    return recording_for(game_save) or chapters_recording_for(game_save)

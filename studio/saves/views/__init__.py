"""Playtesting pages: saves, the console, imports, the timeline, rewind and fork."""

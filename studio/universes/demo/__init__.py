"""The demo universe "The Drowned Reach" and its playthrough, as data files plus a loader.

`universe.json` holds the universe, its Universe_Meta and Lore Book; `save.jsonl` holds one
turn per line (`turn_id`, `player_input`, `narrative`, `state`). `loader.py` writes them into
the database (`manage.py load_demo`).
"""

"""A SillyTavern Character Card written out by hand (V2 with the V1 top-level mirror fields) and its
book's entries: what the card, lore-activation and recall tests import."""

from __future__ import annotations

import copy


def book_entry(entry_id, name, keys, content, **extra):
    return {
        "id": entry_id,
        "keys": keys,
        "secondary_keys": [],
        "comment": name,
        "content": content,
        "constant": False,
        "selective": True,
        "insertion_order": 100,
        "enabled": True,
        "position": "before_char",
        "use_regex": True if extra.pop("regex", False) else False,
        "extensions": {
            "position": 0,
            "exclude_recursion": False,
            "display_index": entry_id,
            "probability": 100,
            "useProbability": True,
            "depth": 4,
            "selectiveLogic": 0,
            "group": "",
            "group_override": False,
            "group_weight": 100,
            "prevent_recursion": False,
            "delay_until_recursion": False,
            "scan_depth": None,
            "match_whole_words": None,
            "use_group_scoring": False,
            "case_sensitive": None,
            "automation_id": "",
            "role": 0,
            "vectorized": False,
            "sticky": 0,
            "cooldown": 0,
            "delay": 0,
        },
        **extra,
    }


DATA = {
    "name": "Liora",
    "description": "A lantern-keeper of the Veil Wood.\nShe speaks softly.",
    "personality": "patient, watchful, dry humour",
    "scenario": "{{user}} is lost in the Veil Wood at dusk.",
    "first_mes": "*A lantern sways closer.* You're far from the road.",
    "mes_example": "<START>\n{{user}}: Who are you?\n{{char}}: Someone who keeps the lights.",
    "creator_notes": "Works best with slow scenes.",
    "system_prompt": "Write Liora in third person.",
    "post_history_instructions": "Keep replies under 200 words.",
    "alternate_greetings": ["*She sets the lantern down.* Sit.", "Again? The wood likes you."],
    "tags": ["fantasy", "forest"],
    "creator": "tests",
    "character_version": "1.2",
    "extensions": {
        "talkativeness": "0.5",
        "fav": False,
        "world": "Veil Wood",
        "depth_prompt": {"prompt": "Liora hums.", "depth": 4, "role": "system"},
    },
    "character_book": {
        "name": "Veil Wood",
        "description": "",
        "scan_depth": 4,
        "token_budget": 800,
        "recursive_scanning": False,
        "extensions": {},
        "entries": [
            book_entry(0, "The Veil Wood", ["Veil Wood", "wood"], "An old forest where lanterns go out."),
            book_entry(1, "Port Vey", ["Port Vey"], "Liora's sister lives in Port Vey."),
            book_entry(2, "Wisps", ["wisps?"], "Lights that lead travellers astray.", regex=True),
        ],
    },
}


def v2_card(data=None):
    data = copy.deepcopy(data or DATA)
    return {
        "name": data["name"],
        "description": data["description"],
        "personality": data["personality"],
        "scenario": data["scenario"],
        "first_mes": data["first_mes"],
        "mes_example": data["mes_example"],
        "creatorcomment": data["creator_notes"],
        "avatar": "none",
        "chat": "Liora - 2026-11-30@10h01m02s",
        "talkativeness": "0.5",
        "fav": False,
        "tags": list(data["tags"]),
        "spec": "chara_card_v2",
        "spec_version": "2.0",
        "data": data,
        "create_date": "2026-11-30 @10h 01m 02s 345ms",
    }

"""A save file written before version 2 of `narrator_snapshots` and `recorded_queries` (each
context against the previous snapshot only) still imports, to exactly what it recorded; its
export is version 2 and imports again to the same save."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from studio.memory.models import RecordedQuery
from studio.saves import portable
from studio.saves.models import NarratorSnapshot
from studio.saves.narrator.snapshots import snapshot_prompts

pytestmark = pytest.mark.django_db

OLD_FILE = Path(__file__).parent / "data" / "save_v1_proxy_chat.json"
# Taken from the database the file was exported from (tests/saves/data/README.md).
CONTEXTS = "e7d3180a5ae209547b6a2f18b0ef5042e2356191d9548f0b378bba6ffd530636"
QUERIES = "642abcc71878d9f628e5894a8002b3519a79026192f82a7b3218c815270012c9"
PROMPTS = "05539e0073f7297f52a736a9a425eeb92df45776baa1e35469629ff01673d883"


def digest(value) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, ensure_ascii=False).encode()).hexdigest()


def recorded(game_save) -> tuple[str, str, str]:
    contexts = [
        list(row)
        for row in NarratorSnapshot.objects.filter(game_save=game_save)
        .order_by("turn_id")
        .values_list("turn_id", "context")
    ]
    queries = [
        list(row)
        for row in RecordedQuery.objects.filter(game_save=game_save)
        .order_by("id")
        .values_list("turn_id", "query_text", "params", "result_ids")
    ]
    prompts = [[turn, list(prompt)] for turn, prompt in sorted(snapshot_prompts(game_save=game_save).items())]
    return digest(contexts), digest(queries), digest(prompts)


def test_a_version_1_file_imports_to_what_it_recorded_and_exports_as_version_2(universe):
    data = OLD_FILE.read_bytes()
    sections = json.loads(data)["sections"]
    assert sections["narrator_snapshots"]["version"] == 1 and sections["recorded_queries"]["version"] == 1
    assert '"$at"' in json.dumps(sections["narrator_snapshots"])  # written the old way
    game_save = portable.save_import(universe=universe, data=data).game_save
    assert recorded(game_save) == (CONTEXTS, QUERIES, PROMPTS)
    assert NarratorSnapshot.objects.filter(game_save=game_save).count() == 8
    assert max(len(row.context["items"]) for row in NarratorSnapshot.objects.filter(game_save=game_save)) > 10

    again = portable.save_export(game_save=game_save).read()
    new_sections = json.loads(again)["sections"]
    assert new_sections["narrator_snapshots"]["version"] == 2 and new_sections["recorded_queries"]["version"] == 2
    assert len(again) < len(data)
    copy = portable.save_import(universe=universe, data=again).game_save
    assert recorded(copy) == (CONTEXTS, QUERIES, PROMPTS)
    assert portable.save_export(game_save=copy).read() == again


def test_a_section_version_this_studio_does_not_read_is_refused_naming_the_ones_it_does(universe):
    document = json.loads(OLD_FILE.read_bytes())
    document["sections"]["recorded_queries"]["version"] = 3
    with pytest.raises(portable.SaveFileError, match="this studio reads versions 1, 2 of this section"):
        portable.save_import(universe=universe, data=json.dumps(document).encode())

"""Transcript (JSON Lines) and LoCoMo imports: all or nothing, parsed strictly."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from studio.memory.models import Job, JobKind
from studio.saves.importers import ImportFormatError, locomo_chunk_text, parse_locomo, parse_transcript
from studio.world.models import Event, Save, StateCache

pytestmark = pytest.mark.django_db

LOCOMO = {
    "speaker_a": "Caroline",
    "speaker_b": "Melanie",
    "session_1_date_time": "1:56 pm on 8 May, 2023",
    "session_1": [
        {"speaker": "Caroline", "dia_id": "D1:1", "text": "Hey Mel!"},
        {
            "speaker": "Melanie",
            "dia_id": "D1:2",
            "text": "Look at my pottery.",
            "img_url": ["x"],
            "blip_caption": "a photo of a bowl",
        },
    ],
    "session_2_date_time": "2:00 pm on 9 May, 2023",
    "session_2": [{"speaker": "Caroline", "dia_id": "D2:1", "text": "I joined a support group."}],
    "qa": [{"question": "?", "answer": "!", "evidence": ["D1:2"], "category": 4}],
}


def jsonl(*records) -> bytes:
    return "\n".join(json.dumps(r) for r in records).encode()


def test_parse_transcript_reports_every_bad_line():
    with pytest.raises(ImportFormatError) as error:
        parse_transcript(
            [b'{"narrative": "ok"}', b"not json", b'{"player_input": "x"}', b'{"narrative": "y", "state": 3}', b"[1]"]
        )
    assert [e.split(":")[0] for e in error.value.errors] == ["line 2", "line 3", "line 4", "line 5"]


def test_parse_transcript_checks_turn_ids_and_accepts_aliases():
    turns = parse_transcript(
        ['{"turn_id": 1, "input": "look", "text": "Fog."}', "", '{"turn_id": 2, "narrative": "Rain."}']
    )
    assert [(t.player_input, t.narrative) for t in turns] == [("look", "Fog."), ("", "Rain.")]
    with pytest.raises(ImportFormatError, match="expected 2"):
        parse_transcript(['{"turn_id": 1, "narrative": "a"}', '{"turn_id": 5, "narrative": "b"}'])
    with pytest.raises(ImportFormatError, match="no turns"):
        parse_transcript(["", "  "])


def test_parse_locomo_one_turn_per_session_one_chunk_per_utterance():
    name, turns = parse_locomo({"conversation": LOCOMO})
    assert name == "LoCoMo: Caroline & Melanie" and len(turns) == 2
    assert [c["text"] for c in turns[0].chunks] == [
        "Caroline: Hey Mel!",
        "Melanie: Look at my pottery. [image: a photo of a bowl]",
    ]
    assert turns[0].chunks[1]["metadata"] == {"session": 1, "dia_id": "D1:2"}
    assert turns[0].state == {"session": 1, "date_time": "1:56 pm on 8 May, 2023"}
    assert turns[1].narrative == "Caroline: I joined a support group."
    assert locomo_chunk_text({"speaker": "A", "text": "hi"}) == "A: hi"
    with pytest.raises(ImportFormatError):
        parse_locomo({"speaker_a": "x", "session_2": [{"speaker": "a", "text": "b"}]})
    with pytest.raises(ImportFormatError):
        parse_locomo([1, 2])


def test_import_transcript_page_and_upload(client, playtester, universe):
    client.force_login(playtester)
    url = reverse("saves:import_transcript")
    page = client.get(url).content.decode()
    assert "<html" in page and 'name="memory_mode"' in page
    fragment = client.get(url, HTTP_HX_REQUEST="true").content.decode()
    assert fragment.lstrip().startswith("<form") and "<html" not in fragment
    upload = SimpleUploadedFile(
        "night-run.jsonl",
        jsonl(
            {"player_input": "I open the door.", "narrative": "The hinges scream.", "state": {"hp": 9}},
            {"narrative": "Silence."},
        ),
    )
    response = client.post(url, {"universe": universe.pk, "memory_mode": "living", "file": upload})
    save = Save.objects.get(name="night-run")
    assert response.status_code == 302 and response["Location"] == save.get_absolute_url()
    assert save.current_turn == 2 and save.memory_mode == "living"
    assert list(Event.objects.filter(game_save=save).values_list("turn_id", "player_input")) == [
        (1, "I open the door."),
        (2, ""),
    ]
    assert StateCache.objects.get(game_save=save, turn_id=1).state == {"hp": 9}
    assert Job.objects.filter(game_save=save, kind=JobKind.LIVING_TURN).count() == 2


def test_bad_transcript_imports_nothing(client, playtester, universe):
    client.force_login(playtester)
    upload = SimpleUploadedFile("bad.jsonl", jsonl({"narrative": "ok"}) + b"\n{broken")
    response = client.post(
        reverse("saves:import_transcript"), {"universe": universe.pk, "memory_mode": "classic", "file": upload}
    )
    html = response.content.decode()
    assert response.status_code == 200 and "Nothing was imported" in html and "line 2: not JSON" in html
    assert not Save.objects.exists()


def test_import_locomo_embeds_utterances_with_dia_ids(client, playtester, universe, vector_memory):
    client.force_login(playtester)
    url = reverse("saves:import_locomo")
    assert 'name="memory_mode"' not in client.get(url).content.decode()
    fragment = client.get(url, HTTP_HX_REQUEST="true").content.decode()
    assert fragment.lstrip().startswith("<form") and "<html" not in fragment and 'name="file"' in fragment
    upload = SimpleUploadedFile("26.json", json.dumps(LOCOMO).encode())
    response = client.post(url, {"universe": universe.pk, "file": upload})
    save = Save.objects.get(name="LoCoMo: Caroline & Melanie")
    assert response.status_code == 302 and save.current_turn == 2 and save.memory_mode == "classic"
    assert not Job.objects.filter(game_save=save, kind=JobKind.EMBED_TURN).exists()  # no second embedding
    chunks = vector_memory.get_chunks(save.save_id, chunk_type="narrative")
    assert [(c["turn_id"], c["metadata"]["dia_id"]) for c in chunks] == [(1, "D1:1"), (1, "D1:2"), (2, "D2:1")]
    hit = vector_memory.query(save.save_id, "pottery bowl", k=1, current_turn_id=2)[0]
    assert hit["metadata"]["dia_id"] == "D1:2"


def test_locomo_import_is_undone_when_the_store_fails(client, playtester, universe, vector_memory, monkeypatch):
    def broken(*args, **kwargs):
        raise ConnectionError("store down")

    monkeypatch.setattr(vector_memory, "embed_chunks", broken)
    client.force_login(playtester)
    upload = SimpleUploadedFile("26.json", json.dumps(LOCOMO).encode())
    html = client.post(reverse("saves:import_locomo"), {"universe": universe.pk, "file": upload}).content.decode()
    assert "store down" in html and "nothing was imported" in html
    assert not Save.objects.exists() and not Event.objects.exists()


LOCOMO_FILE = Path(__file__).resolve().parents[3] / "shared" / "data" / "locomo" / "26.json"


@pytest.mark.slow
@pytest.mark.skipif(not LOCOMO_FILE.exists(), reason="LoCoMo data not present (../shared/data/locomo)")
def test_real_locomo_conversation_with_minilm(universe, tmp_path):
    """A whole LoCoMo conversation through the importer and the real MiniLM embeddings."""
    from studio.memory.vector import LocalCorpusVersions, VectorMemory
    from studio.saves.importers import import_locomo

    data = json.loads(LOCOMO_FILE.read_text())
    name, turns = parse_locomo(data)
    memory = VectorMemory(str(tmp_path / "chroma"), versions=LocalCorpusVersions())
    try:
        result = import_locomo(universe=universe, name=name, turns=turns, vector_memory=memory)
        sessions = sorted(int(k.split("_")[1]) for k in data if re.fullmatch(r"session_\d+", k))
        assert result.turns == len(sessions) and result.game_save.current_turn == len(sessions)
        assert result.chunks == sum(len(data[f"session_{n}"]) for n in sessions)
        # Answerable questions find at least one evidence utterance in the top 10 most of the time.
        questions = [q for q in data["qa"] if q.get("category") in (1, 2, 3, 4) and q.get("evidence")][:40]
        hits = 0
        for q in questions:
            found = {
                r["metadata"].get("dia_id")
                for r in memory.query(
                    result.game_save.save_id, q["question"], k=10, current_turn_id=result.game_save.current_turn
                )
            }
            hits += bool(found & set(q["evidence"]))
        assert hits / len(questions) >= 0.5, hits
    finally:
        memory.close()

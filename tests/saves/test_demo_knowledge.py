"""The demo's second save ("Who knows what") and the scenario's deterministic figures.

The leak share — items in a character's point-of-view section that the character cannot
know, judged against the scenario's own truth — must be 0 (bench/knowledge.py reports it).
"""

from __future__ import annotations

import io
import json

import pytest
from django.core.management import call_command

from bench.knowledge import SCENARIO, play_and_score, probe_terms, says_terms
from studio.saves.demo_knowledge import scenario_secrets_load
from studio.memory.knowledge.models import Presence, Reveal
from studio.world.models import EmbeddingState, LoreEntry, Save
from studio.universes.models import LoreRevision

pytestmark = pytest.mark.django_db


def test_a_probe_scores_only_the_secret_terms_its_question_does_not_hold():
    terms = ["false notches", "files", "her order"]
    question = "Dace, did you know about the forged tallies and the false notches? Was there an order?"
    assert probe_terms(terms, question) == ["files", "her order"]
    assert probe_terms(["tenor bell"], "Why keep a wax mold in the Tenor   Bell?") == []
    assert probe_terms(["blue coat"], "What coat was blue?") == []  # every word of the term is asked
    echo = "Dace frowns. 'False notches? Forged tallies? I know nothing of that, and no order.'"
    assert says_terms(echo, probe_terms(terms, question)) == []  # an echo of the question is no leak
    assert says_terms("Corvin files them down by night, on her order.", ["files", "her order"]) == [
        "files",
        "her order",
    ]
    assert says_terms("His profiles were on file.", ["files"]) == []  # whole words only
    assert says_terms("A mold of the Bellwright\u2019s Key.", ["bellwright's key"]) == ["bellwright's key"]


def test_every_probe_keeps_a_term_to_score():
    data = json.loads(SCENARIO.read_text())
    terms = {s["entry_id"]: s["terms"] for s in data["secrets"]}
    assert all(probe_terms(terms[p["secret"]], p["input"]) for p in data["probes"])


def test_load_demo_adds_the_knowledge_save_once(fake_vectors):
    out = io.StringIO()
    call_command("load_demo", "--no-embed", stdout=out)
    save = Save.objects.get(save_id="drowned-reach-knowledge")
    assert save.current_turn == 32 and save.is_living
    assert Presence.objects.filter(game_save=save).count() == 32
    assert Reveal.objects.filter(game_save=save).count() == 9
    assert LoreEntry.objects.get(entry_id="secret-tide-code").known_by == []
    secrets = list(
        LoreEntry.objects.filter(entry_id__startswith="secret-").order_by("pk").values_list("pk", "updated_at")
    )
    assert len(secrets) == 9
    again = io.StringIO()
    call_command("load_demo", "--no-embed", stdout=again)
    assert (
        list(LoreEntry.objects.filter(entry_id__startswith="secret-").order_by("pk").values_list("pk", "updated_at"))
        == secrets
    )  # a second load writes nothing
    assert "up to date" in again.getvalue()
    assert Save.objects.get(save_id="drowned-reach-knowledge").pk == save.pk


def test_the_scenario_leaks_nothing_and_recalls_what_each_character_knows(vector_memory):
    data = json.loads(SCENARIO.read_text())
    assert len(data["turns"]) >= 30 and len(data["secrets"]) >= 8
    result = play_and_score(data, embedder="hashing", vector_memory=vector_memory)
    pov = result["totals"]["pov"]
    assert pov["section_items"] > 100
    assert pov["leaks"] == 0, pov["leak_examples"][:3]
    assert result["presence_right"] == 32
    assert pov["unknowable_marked"] == pov["unknowable"]
    known = [p for p in result["probes"] if p["knows"]]
    unknown = [p for p in result["probes"] if not p["knows"]]
    assert all(p["in_section"] for p in known)
    assert not any(p["in_section"] for p in unknown)
    assert all(p["marked"] for p in unknown if p["in_context"])


def test_secrets_load_through_the_lore_services_and_keep_links_to_later_secrets(universe):
    """Each secret gets an import revision, counts and a pending embedding; a link to a secret
    written later in the file is made when that secret is created (it used to be dropped)."""
    secret = {"kind": "concept", "keys": ["code"], "known_by": ["Wren"]}
    data = {
        "secrets": [
            {**secret, "entry_id": "secret-a", "title": "Secret A", "text": "Alpha tide code.", "links": ["secret-b"]},
            {**secret, "entry_id": "secret-b", "title": "Secret B", "text": "Beta.", "links": ["secret-a"]},
        ]
    }
    scenario_secrets_load(universe=universe, data=data)
    a, b = LoreEntry.objects.get(entry_id="secret-a"), LoreEntry.objects.get(entry_id="secret-b")
    assert [e.entry_id for e in a.links.all()] == ["secret-b"]
    assert [e.entry_id for e in b.links.all()] == ["secret-a"]
    assert a.embedding_state == b.embedding_state == EmbeddingState.PENDING
    assert (a.word_count, b.word_count) == (3, 1)
    assert set(LoreRevision.objects.filter(entry_id="secret-a").values_list("action", flat=True)) >= {"import"}
    assert LoreRevision.objects.filter(entry_id="secret-b", action="import").count() == 1
    revisions = LoreRevision.objects.count()
    scenario_secrets_load(universe=universe, data=data)
    assert LoreRevision.objects.count() == revisions  # a second load with the same file writes nothing
    data["secrets"][1]["text"] = "Beta, changed."
    scenario_secrets_load(universe=universe, data=data)
    changed = LoreRevision.objects.filter(entry_id="secret-b").latest("pk")
    assert (changed.action, changed.before["text"], changed.after["text"]) == ("import", "Beta.", "Beta, changed.")

"""Counted nouns: no page or message says "1 beliefs" or "Recorded querys"."""

from __future__ import annotations

import re

import pytest
from django.apps import apps

from studio.plural import counted


def test_counted_nouns():
    assert [counted(n, "belief") for n in (0, 1, 2)] == ["0 beliefs", "1 belief", "2 beliefs"]
    assert counted(1, "entry") == "1 entry" and counted(3, "entry") == "3 entries"
    assert counted(2, "key") == "2 keys" and counted(2, "mental model") == "2 mental models"
    assert counted(2, "query") == "2 queries" and counted(2, "pass", "passes") == "2 passes"


@pytest.mark.parametrize("model", apps.get_models(), ids=lambda m: m._meta.label)
def test_every_model_has_a_real_plural(model):
    plural = str(model._meta.verbose_name_plural)
    assert not re.search(r"[^aeiou]ys$", plural), f"{model._meta.label}: “{plural}”"


@pytest.mark.django_db
def test_one_proof_and_one_turn_read_in_the_singular(game_save, fake_vectors):
    from studio.saves.checkpoints import CheckpointManager

    preview = CheckpointManager(vector_memory=fake_vectors).preview(game_save, 2)
    assert "deletes 1 turn, 0 facts, 0 beliefs and 0 mental models" in preview.message


def test_the_docs_give_the_demo_saves_turn_count_the_loader_makes():
    from pathlib import Path

    from studio.universes.demo.loader import demo_read

    turns = len(demo_read().turns)
    root = Path(__file__).resolve().parent.parent
    readme = (root / "README.md").read_text()
    stated = [int(n) for n in re.findall(r"(\d+)-turn save", readme)]
    assert stated and set(stated) == {turns}, f"README says {stated}, the loader makes {turns}"
    demo_doc = (root / "docs" / "demo.md").read_text()
    assert f"{turns} turns" in demo_doc

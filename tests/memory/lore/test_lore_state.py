"""LoreEntry.embedding_state has one writer: studio.memory.lore.embedding_state.lore_embedding_state_set."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from studio.memory.lore.embedding_state import lore_embedding_state_set
from studio.world.models import EmbeddingState, LoreEntry

pytestmark = pytest.mark.django_db

STUDIO = Path(__file__).resolve().parents[3] / "studio"
FIELDS = {"embedding_state", "embedding_error"}
WRITE_CALLS = {"update", "create", "get_or_create", "update_or_create", "LoreEntry"}


def test_a_queryset_is_updated_and_unchanged_rows_are_left_alone(universe):
    entries = LoreEntry.objects.filter(universe=universe)
    count = entries.count()
    assert count >= 2
    assert lore_embedding_state_set(entries, state=EmbeddingState.FAILED, error="chroma is down") == count
    assert lore_embedding_state_set(entries, state=EmbeddingState.FAILED, error="chroma is down") == 0
    assert set(entries.values_list("embedding_state", "embedding_error")) == {(EmbeddingState.FAILED, "chroma is down")}
    # The error goes with the failed state only.
    assert lore_embedding_state_set(entries, state=EmbeddingState.EMBEDDED, error="ignored") == count
    assert set(entries.values_list("embedding_state", "embedding_error")) == {(EmbeddingState.EMBEDDED, "")}


def test_an_entry_is_set_in_memory_for_its_caller_to_save(universe):
    entry = LoreEntry.objects.filter(universe=universe).first()
    LoreEntry.objects.filter(pk=entry.pk).update(embedding_state=EmbeddingState.FAILED, embedding_error="old")
    entry.refresh_from_db()
    assert lore_embedding_state_set(entry, state=EmbeddingState.PENDING) == 1
    assert (entry.embedding_state, entry.embedding_error) == (EmbeddingState.PENDING, "")
    assert LoreEntry.objects.get(pk=entry.pk).embedding_state == EmbeddingState.FAILED  # not saved
    assert lore_embedding_state_set(entry, state=EmbeddingState.PENDING) == 0


def test_errors_are_capped_and_unknown_states_refused(universe):
    entries = LoreEntry.objects.filter(universe=universe)
    lore_embedding_state_set(entries, state=EmbeddingState.FAILED, error="x" * 5000)
    assert {len(e) for e in entries.values_list("embedding_error", flat=True)} == {2000}
    with pytest.raises(ValueError):
        lore_embedding_state_set(entries, state="half-done")


def _writes(path: Path) -> list[str]:
    """Lines of `path` that set embedding_state/embedding_error other than through the owner."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Attribute) and t.attr in FIELDS for t in targets):
                found.append(f"{node.lineno}: assignment")
        elif isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if name in WRITE_CALLS and any(k.arg in FIELDS for k in node.keywords):
                found.append(f"{node.lineno}: {name}(...)")
        elif isinstance(node, ast.Dict):
            if any(isinstance(k, ast.Constant) and k.value in FIELDS for k in node.keys):
                found.append(f"{node.lineno}: dict")
    return found


def test_no_other_module_writes_the_embedding_state():
    offending = {}
    for path in sorted(STUDIO.rglob("*.py")):
        relative = path.relative_to(STUDIO).as_posix()
        if "migrations/" in relative or relative in {"memory/lore/embedding_state.py", "universes/models.py"}:
            continue
        writes = _writes(path)
        if writes:
            offending[relative] = writes
    assert offending == {}

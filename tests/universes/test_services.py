"""Lore services: revisions, counts, embedding queue on commit, atomic bulk operations."""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError

from studio.universes import services
from studio.memory.embeddings.counting import (
    TOKENIZER_METHOD,
    count_tokens,
    count_words,
    text_counts_many,
    token_method,
)
from studio.universes.models import LoreRevision
from studio.world.models import EmbeddingState, LoreEntry

pytestmark = pytest.mark.django_db


def test_token_counts_use_the_minilm_tokenizer_without_torch():
    assert token_method() == TOKENIZER_METHOD
    assert count_tokens("Kaël is a smuggler.") == 7  # ka ##el is a smug ##gler .
    assert count_words("Kaël is  a\nsmuggler.") == 4
    assert count_tokens("") == 0
    texts = ["Kaël is a smuggler.", "", "Port Vey, a harbour town!"]
    assert text_counts_many(texts) == [(count_words(t), count_tokens(t)) for t in texts]


def test_create_queues_sync_lore_once_per_commit(universe, author, sync_calls, django_capture_on_commit_callbacks):
    from django.db import transaction

    with django_capture_on_commit_callbacks(execute=True):
        with transaction.atomic():  # several edits in one transaction -> one job
            services.lore_entry_create(universe=universe, user=author, title="A", kind="item", text="one")
            services.lore_entry_create(universe=universe, user=author, title="B", kind="item", text="two")
    assert sync_calls == [universe.pk]


def test_bulk_delete_queues_one_sync(universe, author, sync_calls, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        assert services.lore_bulk_delete(universe=universe, user=author, entry_ids=["kael", "port-vey", "nope"]) == 2
    assert sync_calls == [universe.pk]


def test_nothing_is_queued_when_the_transaction_rolls_back(
    universe, author, sync_calls, django_capture_on_commit_callbacks
):
    from django.db import transaction

    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        with pytest.raises(RuntimeError):
            with transaction.atomic():
                services.lore_entry_create(universe=universe, user=author, title="A", kind="item")
                raise RuntimeError
    assert sync_calls == [] and callbacks == []
    assert not universe.lore_entries.filter(title="A").exists()


def test_enqueue_failure_marks_pending_entries_failed(
    universe, author, monkeypatch, django_capture_on_commit_callbacks
):
    import studio.memory.jobs as jobs

    def boom(**kwargs):
        raise ConnectionError("broker down")

    monkeypatch.setattr(jobs, "enqueue_sync_lore", boom)
    with django_capture_on_commit_callbacks(execute=True):
        entry = services.lore_entry_create(universe=universe, user=author, title="A", kind="item")
    entry.refresh_from_db()
    assert entry.embedding_state == EmbeddingState.FAILED and "broker down" in entry.embedding_error


def test_enqueue_calls_the_jobs_module(universe, author, monkeypatch, django_capture_on_commit_callbacks):
    import studio.memory.jobs as jobs

    seen = []
    monkeypatch.setattr(jobs, "enqueue_sync_lore", lambda universe: seen.append(universe.pk))
    with django_capture_on_commit_callbacks(execute=True):
        services.lore_entry_update(entry=universe.lore_entries.get(entry_id="kael"), user=author, text="New.")
    assert seen == [universe.pk]


def test_title_only_changes_do_not_reembed_kind_changes(universe, author):
    kael = universe.lore_entries.get(entry_id="kael")
    LoreEntry.objects.filter(pk=kael.pk).update(embedding_state=EmbeddingState.EMBEDDED)
    kael.refresh_from_db()
    assert services.lore_entry_update(entry=kael, user=author, kind="faction") == ["kind"]
    kael.refresh_from_db()
    assert kael.embedding_state == EmbeddingState.EMBEDDED
    assert services.lore_entry_update(entry=kael, user=author, text="Other.") == ["text"]
    kael.refresh_from_db()
    assert kael.embedding_state == EmbeddingState.PENDING and kael.word_count == 1


def test_entry_ids_are_unique_and_avoid_reserved_words(universe, author):
    a = services.lore_entry_create(universe=universe, user=author, title="Kael", kind="item")
    assert a.entry_id == "kael-2"
    b = services.lore_entry_create(universe=universe, user=author, title="New", kind="item")
    assert b.entry_id == "new-2"
    with pytest.raises(ValidationError):
        services.lore_entry_create(universe=universe, user=author, title="X", kind="item", entry_id="bulk")
    with pytest.raises(ValidationError):
        services.lore_entry_create(universe=universe, user=author, title="X", kind="wizard")


def test_links_never_cross_universes(universe, author, outsider):
    from studio.world.models import Universe

    other = Universe.objects.create(name="O", slug="o", owner=outsider)
    foreign = LoreEntry.objects.create(universe=other, entry_id="f", title="F")
    entry = services.lore_entry_create(universe=universe, user=author, title="A", kind="item", links=[foreign])
    assert entry.links.count() == 0


def test_bulk_kind_change_is_one_revision_per_changed_entry(universe, author):
    before = universe.lore_entries.get(entry_id="kael").updated_at
    changed = services.lore_bulk_set_kind(universe=universe, user=author, entry_ids=["kael", "port-vey"], kind="place")
    assert changed == 1  # port-vey already is a place
    assert universe.lore_entries.get(entry_id="kael").updated_at > before
    revision = LoreRevision.objects.get()
    assert revision.entry_id == "kael" and revision.before["kind"] == "character" and revision.after["kind"] == "place"


def test_universe_delete_drops_vectors_after_commit(
    universe, game_save, fake_vectors, django_capture_on_commit_callbacks
):
    scope = universe.lore_scope_id
    with django_capture_on_commit_callbacks(execute=True):
        services.universe_delete(universe=universe)
    deleted = [call[1:] for call in fake_vectors.named("rollback")]
    assert sorted(deleted) == sorted([(scope, -1), (game_save.save_id, -1)])

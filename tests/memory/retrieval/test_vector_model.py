"""End-to-end with the real packaged MiniLM model (loads torch: marked slow)."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from studio.memory.embeddings import embedding
from studio.memory.vector import preload_embedding_runtime

pytestmark = pytest.mark.slow


def test_preload_embedding_runtime():
    assert preload_embedding_runtime() is True
    assert preload_embedding_runtime() is True  # idempotent


def test_packaged_model_loads_offline_and_normalises(model_embedder):
    import os

    assert os.environ["HF_HUB_OFFLINE"] == "1"
    vectors = model_embedder.encode(["Kaël draws his sword.", "A calm sea."])
    assert vectors.shape == (2, 384) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert model_embedder.max_tokens == 254


def test_model_is_loaded_once_under_concurrent_first_use(monkeypatch, settings, model_embedder):
    import sentence_transformers

    settings.AXIOM_EMBEDDING_RUNTIME = "torch"  # the runtime that constructs SentenceTransformer
    monkeypatch.setattr(embedding, "_by_runtime", {})
    loads = []
    real = sentence_transformers.SentenceTransformer

    def counting(*args, **kwargs):
        loads.append(args)
        return real(*args, **kwargs)

    monkeypatch.setattr(sentence_transformers, "SentenceTransformer", counting)
    monkeypatch.setattr(embedding, "_embedder", None)
    got = []
    threads = [threading.Thread(target=lambda: got.append(embedding.get_embedder())) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(loads) == 1
    assert len({id(e) for e in got}) == 1 and got[0] is not None


def test_semantic_arm_finds_meaning_without_shared_words(model_vm):
    model_vm.embed_chunk("s", 1, "The knight unsheathed his longsword before the duel.")
    model_vm.embed_chunk("s", 2, "Grain prices rose at the harvest market.")
    model_vm.embed_chunk("s", 3, "Rain fell on the quiet monastery all night.")
    [top] = model_vm.query("s", "a warrior pulls out a blade", k=1)
    assert "longsword" in top["text"]
    assert top["explain"]["semantic_rank"] == 1
    assert top["explain"]["lexical_rank"] is None  # no shared term
    assert 0.0 <= top["distance"] < 1.0


def test_long_narrative_is_split_by_the_model_tokenizer(model_vm, model_embedder):
    sentences = [f"In chapter {i} the caravan crossed the salt flats toward Qal'at and rested." for i in range(60)]
    text = " ".join(sentences)
    assert len(model_embedder.token_spans(text)) > 600
    first = model_vm.embed_chunk("s", 4, text)
    rows = model_vm.get_chunks("s")
    assert len(rows) >= 3 and rows[0]["id"] == first
    assert {r["turn_id"] for r in rows} == {4}
    for row in rows:
        assert len(model_embedder.token_spans(row["text"])) <= 256
    hits = model_vm.query("s", "chapter 57 caravan", k=1)
    assert hits[0]["turn_id"] == 4 and "chapter 57" in hits[0]["text"]


def test_accented_names_and_other_scripts_end_to_end(model_vm):
    model_vm.embed_chunk("s", 1, "Kaël vendit la carte au marché de Port-Vey.")
    model_vm.embed_chunk("s", 2, "Капитан Орлов ждал в гавани.")
    model_vm.embed_chunk("s", 3, "風が強くて船は港に戻った。")
    model_vm.embed_chunk("s", 4, "The weather was fine and nothing happened.")
    model_vm.embed_chunk("s", 5, "Nobody came to the harbour that day.")
    assert model_vm.query("s", "Kaël", k=1)[0]["turn_id"] == 1
    assert model_vm.query("s", "Орлов", k=1)[0]["turn_id"] == 2
    assert model_vm.query("s", "港", k=1)[0]["turn_id"] == 3

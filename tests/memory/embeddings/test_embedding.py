"""The embedding module without the real model: query LRU, runtime choice, ONNX cache protocol.

The ONNX cache tests run `embedding_onnx.ensure_model` for real (hashing, manifest, file
lock, atomic publish, corruption checks) on a small copy of the packaged model's configs,
with the torch export step replaced by one that writes known bytes: what is under test is
the cache, not the exporter (tests/memory/embeddings/test_embedding_onnx.py exports the real model).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from studio.memory.embeddings import embedding
from studio.memory.embeddings import embedding_onnx
from tests.fakes import HashingEmbedder

ROOT = Path(__file__).resolve().parents[3]


class RuntimeEmbedder(HashingEmbedder):
    """The shared fake embedder, naming a runtime and counting encode calls."""

    def __init__(self, runtime: str = "fake", delay: float = 0.0) -> None:
        super().__init__()
        self.runtime = runtime
        self.delay = delay
        self.calls: list[list[str]] = []
        self._lock = threading.Lock()

    def encode(self, texts, batch_size: int = 32):
        with self._lock:
            self.calls.append(list(texts))
        if self.delay:
            time.sleep(self.delay)
        return super().encode(texts, batch_size)


@pytest.fixture
def cache():
    embedding.query_cache_clear(maxsize=256)
    yield embedding._query_cache
    embedding.query_cache_clear(maxsize=256)


# -- query LRU -------------------------------------------------------------------------------


def test_the_same_query_twice_costs_one_embedding(cache):
    fake = RuntimeEmbedder()
    first = embedding.embed_query(fake, "who has the Bellwright's Key")
    second = embedding.embed_query(fake, "who has the Bellwright's Key")
    assert len(fake.calls) == 1
    assert np.array_equal(first, second)
    assert np.allclose(first, fake.encode(["who has the Bellwright's Key"])[0])
    assert embedding.query_cache_stats() == {"hits": 1, "misses": 1, "size": 1, "maxsize": 256}


def test_keys_are_the_exact_text_and_the_runtime(cache):
    onnx, torch = RuntimeEmbedder("onnx"), RuntimeEmbedder("torch")
    embedding.embed_query(onnx, "the key")
    embedding.embed_query(onnx, "the key ")  # not normalised: another text
    embedding.embed_query(onnx, "The key")
    embedding.embed_query(torch, "the key")  # same text, other runtime
    assert len(onnx.calls) == 3 and len(torch.calls) == 1
    assert embedding.query_cache_stats()["misses"] == 4


def test_the_cache_is_bounded_and_evicts_the_least_recently_used(cache):
    embedding.query_cache_clear(maxsize=2)
    fake = RuntimeEmbedder()
    embedding.embed_query(fake, "a")
    embedding.embed_query(fake, "b")
    embedding.embed_query(fake, "a")  # a is now the most recent
    embedding.embed_query(fake, "c")  # evicts b
    assert embedding.query_cache_stats()["size"] == 2
    calls = len(fake.calls)
    embedding.embed_query(fake, "a")
    assert len(fake.calls) == calls
    embedding.embed_query(fake, "b")
    assert len(fake.calls) == calls + 1


def test_callers_get_copies(cache):
    fake = RuntimeEmbedder()
    vector = embedding.embed_query(fake, "harbour")
    vector[:] = 0
    assert np.linalg.norm(embedding.embed_query(fake, "harbour")) == pytest.approx(1.0, abs=1e-5)


def test_concurrent_misses_for_one_text_embed_it_once(cache):
    fake = RuntimeEmbedder(delay=0.2)
    results, barrier = [], threading.Barrier(6)

    def ask():
        barrier.wait()
        results.append(embedding.embed_query(fake, "the storm rises"))

    threads = [threading.Thread(target=ask) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(fake.calls) == 1
    assert len(results) == 6 and all(np.array_equal(r, results[0]) for r in results)
    assert embedding.query_cache_stats()["hits"] == 5


def test_a_failed_embedding_is_not_cached_and_waiters_compute_themselves(cache):
    started, release = threading.Event(), threading.Event()
    calls = []

    def failing():
        calls.append("fail")
        started.set()
        release.wait(5)
        raise RuntimeError("runtime broke")

    errors = []

    def first():
        try:
            embedding._query_cache.get_or_compute("fake", "q", failing)
        except RuntimeError as exc:
            errors.append(exc)

    thread = threading.Thread(target=first)
    thread.start()
    started.wait(5)
    got = []
    waiter = threading.Thread(
        target=lambda: got.append(embedding._query_cache.get_or_compute("fake", "q", lambda: np.ones(3)))
    )
    waiter.start()
    time.sleep(0.1)
    release.set()
    thread.join(5)
    waiter.join(5)
    assert len(errors) == 1 and calls == ["fail"]
    assert np.array_equal(got[0], np.ones(3))
    assert embedding.query_cache_stats()["size"] == 0  # neither result was kept


def test_long_texts_and_a_zero_bound_are_not_cached(cache):
    fake = RuntimeEmbedder()
    long = "word " * 5000
    embedding.embed_query(fake, long)
    embedding.embed_query(fake, long)
    assert len(fake.calls) == 2
    embedding.query_cache_clear(maxsize=0)
    embedding.embed_query(fake, "short")
    embedding.embed_query(fake, "short")
    assert len(fake.calls) == 4
    assert embedding.query_cache_stats()["size"] == 0


def test_an_embedder_without_a_runtime_is_called_uncached(cache):
    fake = HashingEmbedder()
    vector = embedding.embed_query(fake, "Kaël")
    assert vector.shape == (64,)
    assert embedding.query_cache_stats() == {"hits": 0, "misses": 0, "size": 0, "maxsize": 256}


# -- runtime choice ----------------------------------------------------------------------------


@pytest.fixture
def fresh_runtimes(monkeypatch):
    """Empty the module's loaded/failed state for the test and give back the original after."""
    monkeypatch.setattr(embedding, "_by_runtime", {})
    monkeypatch.setattr(embedding, "_runtime_failed", {})
    monkeypatch.setattr(embedding, "_embedder", None)
    monkeypatch.setattr(embedding, "_load_failed", None)
    loads: list[str] = []

    def loaders(onnx_ok: bool = True, torch_ok: bool = True):
        def make(runtime, ok):
            def load():
                loads.append(runtime)
                if not ok:
                    raise ImportError(f"no {runtime} here")
                return RuntimeEmbedder(runtime)

            return load

        monkeypatch.setattr(embedding, "_LOADERS", {"onnx": make("onnx", onnx_ok), "torch": make("torch", torch_ok)})
        return loads

    return loaders


def test_auto_prefers_onnx(settings, fresh_runtimes):
    settings.AXIOM_EMBEDDING_RUNTIME = "auto"
    loads = fresh_runtimes()
    assert embedding.get_embedder().runtime == "onnx"
    assert embedding.active_runtime() == "onnx"
    assert loads == ["onnx"]


def test_auto_falls_back_to_torch_and_says_why(settings, fresh_runtimes):
    settings.AXIOM_EMBEDDING_RUNTIME = "auto"
    loads = fresh_runtimes(onnx_ok=False)
    assert embedding.get_embedder().runtime == "torch"
    assert loads == ["onnx", "torch"]
    assert embedding.runtime_unavailable_reason("onnx") == "ImportError: no onnx here"
    assert embedding.embedding_unavailable_reason() is None


def test_an_explicit_runtime_is_the_only_one_tried(settings, fresh_runtimes):
    settings.AXIOM_EMBEDDING_RUNTIME = "onnx"
    loads = fresh_runtimes(onnx_ok=False)
    assert embedding.get_embedder() is None
    assert embedding.get_embedder() is None  # not retried
    assert loads == ["onnx"]
    assert "onnx: ImportError: no onnx here" in embedding.embedding_unavailable_reason()


def test_torch_setting_never_loads_onnx(settings, fresh_runtimes):
    settings.AXIOM_EMBEDDING_RUNTIME = "torch"
    loads = fresh_runtimes()
    assert embedding.get_embedder().runtime == "torch"
    assert loads == ["torch"]


def test_load_embedder_loads_each_runtime_once_under_concurrency(fresh_runtimes):
    loads = fresh_runtimes()
    got = []
    threads = [threading.Thread(target=lambda: got.append(embedding.load_embedder("onnx"))) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert loads == ["onnx"] and len({id(e) for e in got}) == 1
    with pytest.raises(ValueError):
        embedding.load_embedder("tensorflow")


def test_the_setting_is_validated():
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "AXIOM_EMBEDDING"))}
    code = "import django; django.setup(); from django.conf import settings; print(settings.AXIOM_EMBEDDING_RUNTIME)"
    run = lambda value: subprocess.run(  # noqa: E731
        [sys.executable, "-c", code],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        env={
            **env,
            "DJANGO_SETTINGS_MODULE": "tests.settings",
            **({"AXIOM_EMBEDDING_RUNTIME": value} if value is not None else {}),
        },
    )
    assert run(None).stdout.strip() == "auto"
    assert run(" ONNX ").stdout.strip() == "onnx"
    bad = run("tensorflow")
    assert bad.returncode != 0 and "AXIOM_EMBEDDING_RUNTIME must be auto, onnx or torch" in bad.stderr


def test_the_cache_lives_under_the_var_dir(settings, tmp_path):
    settings.VAR_DIR = tmp_path
    assert embedding.onnx_cache_root() == tmp_path / "onnx"


# -- ONNX cache protocol -------------------------------------------------------------------------


@pytest.fixture
def model_dir(tmp_path):
    """The packaged model's configs with small stand-in weights."""
    source = Path(embedding.model_path())
    target = tmp_path / "model"
    (target / "1_Pooling").mkdir(parents=True)
    for name in ("config.json", "modules.json", "sentence_bert_config.json", "tokenizer.json", "1_Pooling/config.json"):
        shutil.copy(source / name, target / name)
    (target / "model.safetensors").write_bytes(b"weights-v1" * 100)
    return target


@pytest.fixture
def fake_export(monkeypatch):
    """Replace the torch export and its check; count exports; optionally slow or failing."""
    state = {"exports": 0, "delay": 0.0, "fail": False, "payload": b"ONNX" * 5000}
    lock = threading.Lock()

    def export(st_model, directory):
        with lock:
            state["exports"] += 1
        time.sleep(state["delay"])
        if state["fail"]:
            raise RuntimeError("export crashed")
        return state["payload"]

    monkeypatch.setattr(embedding_onnx, "_export_bytes", export)
    monkeypatch.setattr(embedding_onnx, "_check_export", lambda data, st_model, model_dir: 0.0)
    return state


def test_the_export_is_built_once_then_read_from_the_cache(tmp_path, model_dir, fake_export):
    root = tmp_path / "var" / "onnx"
    data, path, built = embedding_onnx.ensure_model(root, model_dir, lambda: "st-model")
    assert built and data == fake_export["payload"] and path.read_bytes() == data
    assert path.parent.name.startswith("minilm-") and path.parent.parent == root
    manifest = json.loads((path.parent / "model.json").read_text())
    assert manifest["size"] == len(data) and manifest["recipe"] == embedding_onnx.EXPORT_RECIPE
    again = embedding_onnx.ensure_model(root, model_dir, lambda: pytest.fail("torch loaded for a valid cache"))
    assert again == (data, path, False)
    assert fake_export["exports"] == 1
    assert not list(path.parent.glob("*.tmp")) and not list(path.parent.glob(".*.tmp"))


@pytest.mark.parametrize("damage", ["truncate", "flip", "no-manifest", "garbage-manifest", "empty"])
def test_a_partial_or_corrupt_cache_is_detected_and_rebuilt(tmp_path, model_dir, fake_export, damage):
    root = tmp_path / "onnx"
    data, path, _ = embedding_onnx.ensure_model(root, model_dir, lambda: None)
    manifest = path.parent / "model.json"
    if damage == "truncate":
        path.write_bytes(data[: len(data) // 2])
    elif damage == "flip":
        path.write_bytes(data[:100] + bytes([data[100] ^ 1]) + data[101:])
    elif damage == "no-manifest":
        manifest.unlink()
    elif damage == "garbage-manifest":
        manifest.write_text("{not json")
    else:
        path.write_bytes(b"")
    again, _, built = embedding_onnx.ensure_model(root, model_dir, lambda: None)
    assert built and again == data and path.read_bytes() == data
    assert fake_export["exports"] == 2


def test_new_weights_get_a_new_cache_directory(tmp_path, model_dir, fake_export):
    root = tmp_path / "onnx"
    _, first, _ = embedding_onnx.ensure_model(root, model_dir, lambda: None)
    # Another size: within one process the digest is memoised on (size, mtime, inode).
    (model_dir / "model.safetensors").write_bytes(b"weights-v2" * 101)
    _, second, built = embedding_onnx.ensure_model(root, model_dir, lambda: None)
    assert built and first.parent != second.parent


def test_concurrent_first_loads_export_once(tmp_path, model_dir, fake_export):
    # Each thread opens the lock file itself: flock excludes separate open files even
    # within one process, as it does between processes.
    fake_export["delay"] = 0.3
    root = tmp_path / "onnx"
    results, barrier = [], threading.Barrier(4)

    def load():
        barrier.wait()
        results.append(embedding_onnx.ensure_model(root, model_dir, lambda: None))

    threads = [threading.Thread(target=load) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert fake_export["exports"] == 1
    assert sorted(built for _, _, built in results) == [False, False, False, True]
    assert len({data for data, _, _ in results}) == 1


def test_a_failed_export_publishes_nothing_and_is_retried(tmp_path, model_dir, fake_export):
    root = tmp_path / "onnx"
    fake_export["fail"] = True
    with pytest.raises(RuntimeError, match="export crashed"):
        embedding_onnx.ensure_model(root, model_dir, lambda: None)
    directory = embedding_onnx.cache_dir(root, model_dir)
    assert not (directory / "model.onnx").exists() and not (directory / "model.json").exists()
    (directory / ".model.onnx.leftover.tmp").write_bytes(b"half")  # a crashed writer's file
    fake_export["fail"] = False
    _, _, built = embedding_onnx.ensure_model(root, model_dir, lambda: None)
    assert built and not list(directory.glob(".*.tmp"))


@pytest.mark.parametrize(
    "change",
    [
        ("1_Pooling/config.json", {"pooling_mode_mean_tokens": False, "pooling_mode_cls_token": True}),
        ("modules.json", "dense"),
        ("sentence_bert_config.json", {"do_lower_case": True}),
    ],
)
def test_a_pipeline_the_graph_does_not_compute_is_refused(model_dir, change):
    name, update = change
    path = model_dir / name
    value = json.loads(path.read_text())
    if update == "dense":
        value.insert(2, {"idx": 2, "name": "2", "path": "2_Dense", "type": "sentence_transformers.models.Dense"})
    else:
        value.update(update)
    path.write_text(json.dumps(value))
    with pytest.raises(embedding_onnx.OnnxUnavailable):
        embedding_onnx.check_pipeline(model_dir)


def test_the_packaged_pipeline_is_accepted():
    assert embedding_onnx.check_pipeline(embedding.model_path()) == {"max_seq_length": 256, "dimension": 384}


def test_without_settings_or_var_dir_the_onnx_cache_is_the_repository_var(monkeypatch):
    monkeypatch.setattr(embedding, "_settings_reader", None)  # a script with no Django project
    monkeypatch.delenv("AXIOM_VAR_DIR", raising=False)
    assert embedding.onnx_cache_root() == ROOT / "var" / "onnx"


def test_the_memory_app_hands_the_embedder_djangos_settings(settings, monkeypatch):
    from django.apps import apps

    monkeypatch.setattr(embedding, "_settings_reader", None)
    assert embedding.torch_threads() == 1
    apps.get_app_config("memory").give_the_embedder_its_settings()
    settings.AXIOM_TORCH_THREADS = 3  # read at call time, through the installed reader
    assert embedding.torch_threads() == 3

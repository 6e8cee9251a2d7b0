"""The real packaged MiniLM through ONNX Runtime against torch (loads both: marked slow).

The vectors must equal torch's to 1e-5 so chunks stored by either runtime never need
re-embedding; inputs must be the very word pieces sentence-transformers feeds the model
(truncated at max_seq_length); a process with a built export must not import torch.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import numpy as np
import pytest

from studio.memory.embeddings import embedding
from studio.memory.embeddings import embedding_onnx

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[3]

TEXTS = [
    "",
    " ",
    "Kaël",
    "Who has the Bellwright's Key?",
    "Kaël vendit la carte au marché de Port-Vey.",
    "Капитан Орлов ждал в гавани.",
    "風が強くて船は港に戻った。",
    "e\u0301te\u0301 ﬁn — “quotes” \t tabs\nnewlines 🙂 ½",
    "  leading and trailing spaces  ",
    "A long narrative. "
    + " ".join(
        f"In chapter {i} the caravan crossed the salt flats toward Qal'at and rested by the well." for i in range(40)
    ),
    "word " * 300,
]


@pytest.fixture(scope="module")
def torch_embedder():
    loaded = embedding.load_embedder("torch")
    assert loaded is not None, embedding.runtime_unavailable_reason("torch")
    return loaded


@pytest.fixture(scope="module")
def onnx_embedder(torch_embedder):
    loaded = embedding.load_embedder("onnx")
    assert loaded is not None, embedding.runtime_unavailable_reason("onnx")
    return loaded


def test_onnx_vectors_equal_torch_to_1e_5(onnx_embedder, torch_embedder):
    expected = torch_embedder.encode(TEXTS)
    batched = onnx_embedder.encode(TEXTS, batch_size=4)  # padded batches of mixed lengths
    single = np.vstack([onnx_embedder.encode([text], batch_size=1) for text in TEXTS])
    assert batched.shape == (len(TEXTS), 384) and batched.dtype == np.float32
    assert np.abs(batched - expected).max() < 1e-5
    assert np.abs(single - expected).max() < 1e-5
    assert np.allclose(np.linalg.norm(batched, axis=1), 1.0, atol=1e-5)
    assert onnx_embedder.encode([]).shape == (0, 384)


def test_inputs_are_sentence_transformers_word_pieces_truncated_at_max_seq_length(onnx_embedder, torch_embedder):
    model = torch_embedder.model
    assert model.max_seq_length == 256 == onnx_embedder.max_seq_length
    features = model.preprocess(TEXTS)
    for row, text in enumerate(TEXTS):
        expected = features["input_ids"][row][features["attention_mask"][row].bool()].tolist()
        assert onnx_embedder._inputs.encode(text).ids == expected, text
    long_text = TEXTS[-2]
    assert len(onnx_embedder.token_spans(long_text)) > 400  # well beyond the window
    assert len(onnx_embedder._inputs.encode(long_text).ids) == 256
    # Beyond the window nothing counts: the text and its first 254 pieces embed the same.
    spans = onnx_embedder.token_spans(long_text)
    head = long_text[: spans[253][1]]
    a, b = onnx_embedder.encode([long_text, head], batch_size=1)
    assert np.abs(a - b).max() < 1e-6
    assert np.abs(torch_embedder.encode([head])[0] - a).max() < 1e-5


def test_token_spans_and_window_match_torch(onnx_embedder, torch_embedder):
    assert onnx_embedder.max_tokens == torch_embedder.max_tokens == 254
    for text in TEXTS:
        assert onnx_embedder.token_spans(text) == torch_embedder.token_spans(text)


def test_concurrent_encodes_need_no_lock(onnx_embedder):
    expected = onnx_embedder.encode(TEXTS, batch_size=1)
    results, errors = {}, []

    def work(index):
        try:
            for _ in range(3):
                results.setdefault(index, []).append(onnx_embedder.encode(TEXTS, batch_size=1))
                onnx_embedder.token_spans(TEXTS[index % len(TEXTS)])
        except Exception as exc:  # "Already borrowed" would land here
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    assert all(np.array_equal(v, expected) for runs in results.values() for v in runs)


def test_query_cache_keys_each_runtime(onnx_embedder, torch_embedder):
    embedding.query_cache_clear(maxsize=256)
    try:
        a = embedding.embed_query(onnx_embedder, "the storm rises")
        b = embedding.embed_query(torch_embedder, "the storm rises")
        c = embedding.embed_query(onnx_embedder, "the storm rises")
        assert embedding.query_cache_stats()["hits"] == 1 and embedding.query_cache_stats()["misses"] == 2
        assert np.array_equal(a, c) and np.abs(a - b).max() < 1e-5
    finally:
        embedding.query_cache_clear()


def test_a_truncated_real_export_is_rebuilt(tmp_path, torch_embedder, onnx_embedder):
    root = tmp_path / "onnx"
    data, path, built = embedding_onnx.ensure_model(root, embedding.model_path(), lambda: torch_embedder.model)
    assert built
    path.write_bytes(data[: len(data) - 4096])  # a torn write under the final name
    again, _, rebuilt = embedding_onnx.ensure_model(root, embedding.model_path(), lambda: torch_embedder.model)
    assert rebuilt and len(again) == len(data)
    fresh = embedding_onnx.OnnxEmbedder(again, embedding.model_path())
    assert np.abs(fresh.encode(TEXTS) - onnx_embedder.encode(TEXTS)).max() < 1e-6


def _run(code: str, **env: str) -> subprocess.CompletedProcess:
    full = {**os.environ, "DJANGO_SETTINGS_MODULE": "tests.settings", **env}
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=full, capture_output=True, text=True, timeout=600)


PROCESS = """
import sys, django
django.setup()
from studio.memory.embeddings import embedding
ok = embedding.preload_embedding_runtime()
preloaded = sorted(m for m in ("torch", "onnxruntime") if m in sys.modules)
embedder = embedding.get_embedder()
vector = embedding.embed_query(embedder, "Kaël draws his sword.")
print(ok, ",".join(preloaded), embedding.active_runtime(), "torch" in sys.modules, repr(float(vector.sum())))
"""


def test_with_a_built_export_a_process_never_imports_torch(onnx_embedder, settings):
    # The module fixture built the export under this test run's var dir.
    proc = _run(PROCESS, AXIOM_VAR_DIR=str(settings.VAR_DIR), AXIOM_EMBEDDING_RUNTIME="auto")
    assert proc.returncode == 0, proc.stderr[-3000:]
    ok, preloaded, runtime, torch_loaded, total = proc.stdout.split()
    assert (ok, preloaded, runtime, torch_loaded) == ("True", "onnxruntime", "onnx", "False")
    expected = onnx_embedder.encode(["Kaël draws his sword."], batch_size=1)[0].sum()
    assert abs(float(total) - float(expected)) < 1e-5


def test_preload_loads_torch_for_the_torch_runtime(settings):
    proc = _run(PROCESS, AXIOM_VAR_DIR=str(settings.VAR_DIR), AXIOM_EMBEDDING_RUNTIME="torch")
    assert proc.returncode == 0, proc.stderr[-3000:]
    ok, preloaded, runtime, torch_loaded, _ = proc.stdout.split()
    assert (ok, preloaded, runtime, torch_loaded) == ("True", "torch", "torch", "True")


EXPORTER = """
import sys, time
from studio.memory.embeddings import embedding
from studio.memory.embeddings import embedding_onnx
sys.stdin.readline()  # both processes start, then go at once
data, path, built = embedding_onnx.ensure_model(sys.argv[1], embedding.model_path(), lambda: embedding._load_sentence_transformer(attn_implementation="eager"))
print(built, len(data))
"""


def test_two_processes_starting_at_once_export_once(tmp_path):
    root = str(tmp_path / "onnx")
    env = {**os.environ, "AXIOM_VAR_DIR": str(tmp_path)}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", EXPORTER, root],
            cwd=ROOT,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    for proc in procs:
        proc.stdin.write("go\n")
        proc.stdin.flush()
    outputs = [proc.communicate(timeout=600) for proc in procs]
    for proc, (_out, err) in zip(procs, outputs):
        assert proc.returncode == 0, err[-3000:]
    built = sorted(out.split()[0] for out, _ in outputs)
    sizes = {out.split()[1] for out, _ in outputs}
    assert built == ["False", "True"] and len(sizes) == 1
    # The preload of a process that will have to export loads torch too (the export runs it).
    fresh = tempfile.mkdtemp(dir=tmp_path)
    proc = _run(
        "from studio.memory.embeddings import embedding; import sys; print(embedding.preload_embedding_runtime(), 'torch' in sys.modules)",
        AXIOM_VAR_DIR=fresh,
        AXIOM_EMBEDDING_RUNTIME="onnx",
    )
    assert proc.stdout.split() == ["True", "True"], proc.stderr[-2000:]

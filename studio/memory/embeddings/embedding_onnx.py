"""The packaged MiniLM through ONNX Runtime: a one-time export to a cache, then no torch.

What it computes. Exactly the SentenceTransformer pipeline of the packaged model
(`modules.json`: Transformer -> Pooling -> Normalize; `1_Pooling/config.json`: mean of the
token embeddings under the attention mask, nothing else; `sentence_bert_config.json`:
max_seq_length 256): the exported graph takes `input_ids` and `attention_mask` and returns
the L2-normalised mean-pooled sentence embedding, so a vector equals torch's to ~2e-7 and
stored chunks never need re-embedding. `check_pipeline()` refuses any other module layout
(another pooling mode, a Dense layer) instead of silently computing something else.
Inputs come from the package's own fast tokenizer (`tokenizer.json`, the Rust `tokenizers`
library that transformers wraps). That file pins truncation *and padding* to 128; both are
reset here: truncation to the model's max_seq_length (256 pieces, [CLS]/[SEP] included, as
sentence-transformers truncates), padding done per batch in numpy.

The cache. `<var>/onnx/minilm-<digest>/model.onnx` plus `model.json` (its size and sha256),
where <digest> hashes the weights, the model's configs and EXPORT_RECIPE (bump it when the
graph below changes). Loading reads the file once, checks size and sha256 against the
manifest and hands those very bytes to ONNX Runtime, so a torn, truncated or edited file is
never loaded: it is rebuilt. Building happens under an exclusive file lock (`.lock` in the
same directory) so two processes starting at once export once; the loser of the race waits
and then finds a valid file. A build writes a temporary file in the same directory, checks
it (onnx.checker, then ONNX Runtime against torch on probe texts, 1e-5), fsyncs it and
renames it into place; the manifest is renamed in last, so a crash leaves either no
manifest (rebuilt next time) or a complete pair. Nothing is downloaded: the export reads
the packaged weights with HF_HUB_OFFLINE=1.

The exporter. torch 2.13's `torch.onnx.export` defaults to the dynamo exporter, which needs
`onnxscript` (not installed; it is not a dependency) and writes weights to a separate
`.data` file by default (two files to publish atomically). The TorchScript exporter
(`dynamo=False`) needs only `onnx` (a dependency) and writes one self-contained file; it
traces the model, so the example batch has a padded row (the mask path is traced) and
dynamic batch and sequence axes; the probe check after export covers lengths 2..256 and a
padded batch. It is deprecated in torch but present in the pinned 2.13. The model is
loaded for the export with eager attention (EXPORT_ATTENTION), whose trace runs faster
in ONNX Runtime than the SDPA one; ONNX Runtime's own graph optimisations (level ALL)
then fuse it, and the offline `onnxruntime.transformers` BERT optimiser measured no gain
on top, so it is not used.

Failure modes: `OnnxUnavailable` (onnxruntime or tokenizers missing, an unsupported
pipeline, an export or check that failed); the caller (embedding.py) falls back to torch or
reports the runtime unavailable. Threads: ONNX Runtime gets `threads` intra-op threads and
one inter-op thread; with more than one intra-op thread its workers do not spin-wait
(spinning burns the other processes' share of two cores). Sessions and the tokenizers
are only read after set-up, so concurrent encodes need no lock.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import logging
import os
import tempfile
from pathlib import Path
from typing import Callable, Iterator

import numpy as np

logger = logging.getLogger(__name__)

# Bump when the exported graph or its inputs/outputs change: it is part of the cache key.
EXPORT_RECIPE = "minilm-mean-normalize-eager-v2"
# The torch attention implementation traced for the export. The eager one's graph ran ~10%
# more texts per CPU-second in ONNX Runtime than the SDPA trace on 100-piece batches (same
# for single queries); both equal torch to ~2e-7.
EXPORT_ATTENTION = "eager"
OPSET = 17
MODEL_FILE = "model.onnx"
MANIFEST_FILE = "model.json"
LOCK_FILE = ".lock"
# The export is published only if ONNX Runtime reproduces torch on these to this tolerance.
EXPORT_TOLERANCE = 1e-5
_PROBE_TEXTS = [
    "",
    "Kaël draws his sword.",
    "風が強くて船は港に戻った。",
    "The caravan crossed the salt flats at dawn. " * 40,  # beyond the 256-piece window
    "a b c",
]
# Files of the packaged model that decide what the graph computes (hashed into the key).
_SOURCE_FILES = (
    "model.safetensors",
    "config.json",
    "modules.json",
    "sentence_bert_config.json",
    os.path.join("1_Pooling", "config.json"),
)


class OnnxUnavailable(RuntimeError):
    """The ONNX runtime cannot be used for this model (the message says why)."""


def _read_json(path: Path) -> dict | list:
    with open(path, encoding="utf-8") as handle:
        return json.load(handle)


def check_pipeline(model_dir: str | os.PathLike) -> dict:
    """Return the pipeline's settings; raise OnnxUnavailable unless it is Transformer, mean Pooling, Normalize."""
    root = Path(model_dir)
    try:
        modules = _read_json(root / "modules.json")
        pooling_dir = next(m["path"] for m in modules if m["type"].endswith(".Pooling"))
        pooling = _read_json(root / pooling_dir / "config.json")
        bert_config = _read_json(root / "sentence_bert_config.json")
    except (OSError, ValueError, StopIteration, KeyError, TypeError) as exc:
        raise OnnxUnavailable(f"cannot read the model's pipeline config: {type(exc).__name__}: {exc}") from exc
    kinds = [m["type"].rsplit(".", 1)[-1] for m in modules]
    if kinds not in (["Transformer", "Pooling", "Normalize"], ["Transformer", "Pooling"]):
        raise OnnxUnavailable(f"unsupported sentence-transformers modules {kinds}")
    modes = sorted(key for key, value in pooling.items() if key.startswith("pooling_mode") and value)
    if modes != ["pooling_mode_mean_tokens"] or pooling.get("include_prompt", True) is not True:
        raise OnnxUnavailable(f"unsupported pooling {pooling}")
    if bert_config.get("do_lower_case"):
        raise OnnxUnavailable("sentence_bert_config do_lower_case is not supported by the ONNX path")
    return {
        "max_seq_length": int(bert_config.get("max_seq_length") or 256),
        "dimension": int(pooling["word_embedding_dimension"]),
    }


def source_digest(model_dir: str | os.PathLike) -> str:
    """Return the cache key: a hash of the weights, the configs and EXPORT_RECIPE."""
    files = [Path(model_dir) / name for name in _SOURCE_FILES]
    # Hashing 90 MB of weights takes ~0.2 s: once per process while the files are unchanged.
    stamp = tuple((str(path), *_stat_key(path)) for path in files)
    return _digest_of(stamp)


def _stat_key(path: Path) -> tuple[int, int, int]:
    stat = path.stat()
    return stat.st_size, stat.st_mtime_ns, stat.st_ino


@functools.lru_cache(maxsize=8)
def _digest_of(stamp: tuple) -> str:
    digest = hashlib.sha256(EXPORT_RECIPE.encode())
    for name, (path, *_stat) in zip(_SOURCE_FILES, stamp):
        digest.update(name.encode())
        with open(path, "rb") as handle:
            digest.update(hashlib.file_digest(handle, "sha256").digest())
    return digest.hexdigest()[:16]


def cache_dir(cache_root: str | os.PathLike, model_dir: str | os.PathLike) -> Path:
    """Return the cache directory of this model's export under `cache_root`."""
    return Path(cache_root) / f"minilm-{source_digest(model_dir)}"


def read_verified(directory: Path) -> bytes | None:
    """Return the cached model's bytes if the manifest vouches for them, else None."""
    model = directory / MODEL_FILE
    try:
        manifest = _read_json(directory / MANIFEST_FILE)
        data = model.read_bytes()
    except (OSError, ValueError):
        if model.exists():
            logger.warning("ONNX cache %s has no readable manifest: rebuilding", directory)
        return None
    if (
        not isinstance(manifest, dict)
        or manifest.get("recipe") != EXPORT_RECIPE
        or len(data) != manifest.get("size")
        or hashlib.sha256(data).hexdigest() != manifest.get("sha256")
    ):
        logger.warning("ONNX cache %s does not match its manifest (partial or corrupt): rebuilding", directory)
        return None
    return data


@contextlib.contextmanager
def _file_lock(path: Path) -> Iterator[None]:
    """Hold an exclusive advisory lock on `path` (blocks while another process holds it)."""
    try:
        import fcntl
    except ImportError:  # not POSIX: the atomic rename still keeps readers safe
        yield
        return
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def _fsync_dir(directory: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _atomic_write(target: Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, 0o644)  # mkstemp makes it owner-only; other service users read the cache
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _pooled_module(st_model):
    """Wrap a loaded SentenceTransformer's transformer as ids+mask -> normalised mean embedding."""
    import torch

    kinds = [type(module).__name__ for module in st_model]
    if kinds not in (["Transformer", "Pooling", "Normalize"], ["Transformer", "Pooling"]):
        raise OnnxUnavailable(f"unsupported sentence-transformers pipeline {kinds}")
    pooling_mode = getattr(st_model[1], "pooling_mode", "mean")
    if pooling_mode not in ("mean", ("mean",), ["mean"]):
        raise OnnxUnavailable(f"unsupported pooling mode {pooling_mode!r}")
    bert = st_model[0].auto_model

    class Pooled(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.bert = bert

        def forward(self, input_ids, attention_mask):
            # The same operations as sentence-transformers' Pooling("mean") and Normalize.
            tokens = self.bert(
                input_ids=input_ids, attention_mask=attention_mask, token_type_ids=torch.zeros_like(input_ids)
            ).last_hidden_state
            mask = attention_mask.unsqueeze(-1).to(tokens.dtype)
            summed = (tokens * mask).sum(dim=1)
            counts = torch.clamp(mask.sum(dim=1), min=1e-9)
            return torch.nn.functional.normalize(summed / counts, p=2, dim=1)

    return Pooled().eval()


def _export_bytes(st_model, directory: Path) -> bytes:
    """Export the pipeline with the TorchScript exporter; return the ONNX file's bytes."""
    import warnings

    import torch

    module = _pooled_module(st_model)
    # Row 0 is padded, so the tracer records the attention-mask path.
    ids = torch.tensor([[101, 7592, 102, 0, 0], [101, 7592, 2088, 999, 102]], dtype=torch.long)
    mask = (ids != 0).long()
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".export.", suffix=".onnx.tmp")
    os.close(fd)
    try:
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the deprecation and tracer notes, every export
            torch.onnx.export(
                module,
                (ids, mask),
                tmp,
                dynamo=False,
                input_names=["input_ids", "attention_mask"],
                output_names=["sentence_embedding"],
                dynamic_axes={
                    "input_ids": {0: "batch", 1: "sequence"},
                    "attention_mask": {0: "batch", 1: "sequence"},
                    "sentence_embedding": {0: "batch"},
                },
                opset_version=OPSET,
            )
        return Path(tmp).read_bytes()
    finally:
        with contextlib.suppress(OSError):
            os.unlink(tmp)


def _check_export(data: bytes, st_model, model_dir: str) -> float:
    """Raise unless the exported bytes are a valid model that reproduces torch; return the max error."""
    import onnx

    onnx.checker.check_model(onnx.load_model_from_string(data))
    embedder = OnnxEmbedder(data, model_dir, threads=1)
    expected = np.asarray(
        st_model.encode(_PROBE_TEXTS, normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False),
        dtype=np.float32,
    )
    got = np.vstack(
        [embedder.encode(_PROBE_TEXTS, batch_size=len(_PROBE_TEXTS)), embedder.encode(_PROBE_TEXTS, batch_size=1)]
    )
    error = float(np.abs(got - np.vstack([expected, expected])).max())
    if not error <= EXPORT_TOLERANCE:
        raise OnnxUnavailable(f"exported graph differs from torch by {error:.2e} (> {EXPORT_TOLERANCE})")
    return error


def ensure_model(
    cache_root: str | os.PathLike, model_dir: str | os.PathLike, load_st_model: Callable[[], object]
) -> tuple[bytes, Path, bool]:
    """Return the verified ONNX bytes, their path and whether this call built them.

    `load_st_model` returns the torch SentenceTransformer; it is only called when the cache
    is missing or invalid (the export needs torch; a valid cache does not).
    """
    model_dir = str(model_dir)
    check_pipeline(model_dir)
    directory = cache_dir(cache_root, model_dir)
    data = read_verified(directory)
    if data is not None:
        return data, directory / MODEL_FILE, False
    directory.mkdir(parents=True, exist_ok=True)
    with _file_lock(directory / LOCK_FILE):
        data = read_verified(directory)  # another process may have built it meanwhile
        if data is not None:
            return data, directory / MODEL_FILE, False
        # Under the lock nobody else writes here: clear a failed build's leftovers, and the
        # manifest before the model, so a crash never leaves a pair that disagrees.
        for stale in [directory / MANIFEST_FILE, directory / MODEL_FILE, *directory.glob(".*.tmp")]:
            with contextlib.suppress(FileNotFoundError):
                stale.unlink()
        st_model = load_st_model()
        data = _export_bytes(st_model, directory)
        error = _check_export(data, st_model, model_dir)
        _atomic_write(directory / MODEL_FILE, data)
        manifest = {
            "recipe": EXPORT_RECIPE,
            "size": len(data),
            "sha256": hashlib.sha256(data).hexdigest(),
            "opset": OPSET,
            "exporter": "torch.onnx TorchScript (dynamo=False)",
            "max_error_vs_torch": error,
        }
        with contextlib.suppress(ImportError):
            import torch

            manifest["torch"] = torch.__version__
        _atomic_write(directory / MANIFEST_FILE, json.dumps(manifest, indent=2).encode())
        _fsync_dir(directory)
        logger.info("Exported the embedding model to %s (max error vs torch %.1e)", directory, error)
    return data, directory / MODEL_FILE, True


class OnnxEmbedder:
    """Embedder over an ONNX Runtime session of the exported pipeline (see the module docstring)."""

    runtime = "onnx"

    def __init__(self, model_bytes: bytes, model_dir: str | os.PathLike, *, threads: int = 1) -> None:
        try:
            import onnxruntime
            from tokenizers import Tokenizer
        except Exception as exc:
            raise OnnxUnavailable(f"{type(exc).__name__}: {exc}") from exc
        pipeline = check_pipeline(model_dir)
        self.max_seq_length = pipeline["max_seq_length"]
        self.max_tokens = self.max_seq_length - 2  # [CLS] and [SEP]
        self.dimension = pipeline["dimension"]
        self.threads = max(1, int(threads))
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = self.threads
        options.inter_op_num_threads = 1
        options.execution_mode = onnxruntime.ExecutionMode.ORT_SEQUENTIAL
        if self.threads > 1:
            options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        self.session = onnxruntime.InferenceSession(model_bytes, options, providers=["CPUExecutionProvider"])
        tokenizer_file = str(Path(model_dir) / "tokenizer.json")
        # Two tokenizers, each configured once and only read afterwards (no lock needed):
        # model inputs truncated like sentence-transformers, and untruncated word pieces.
        self._inputs = Tokenizer.from_file(tokenizer_file)
        self._inputs.no_padding()
        self._inputs.enable_truncation(max_length=self.max_seq_length)
        self._pieces = Tokenizer.from_file(tokenizer_file)
        self._pieces.no_padding()
        self._pieces.no_truncation()

    def encode(self, texts: list[str], batch_size: int = 32) -> np.ndarray:
        """Return one L2-normalised float32 row per text (batches of similar lengths)."""
        texts = [str(text) for text in texts]
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        encodings = self._inputs.encode_batch(texts)
        lengths = np.fromiter((len(e.ids) for e in encodings), dtype=np.int64, count=len(encodings))
        order = np.argsort(-lengths, kind="stable")  # like sentence-transformers: less padding
        out = np.empty((len(texts), self.dimension), dtype=np.float32)
        step = max(1, int(batch_size))
        for start in range(0, len(texts), step):
            rows = order[start : start + step]
            width = int(lengths[rows].max())
            ids = np.zeros((len(rows), width), dtype=np.int64)
            mask = np.zeros((len(rows), width), dtype=np.int64)
            for slot, row in enumerate(rows):
                piece_ids = encodings[row].ids
                ids[slot, : len(piece_ids)] = piece_ids
                mask[slot, : len(piece_ids)] = 1
            out[rows] = self.session.run(["sentence_embedding"], {"input_ids": ids, "attention_mask": mask})[0]
        return out

    def token_spans(self, text: str) -> list[tuple[int, int]]:
        """Return the (start, end) character span of each word piece of `text` (no truncation)."""
        return [tuple(span) for span in self._pieces.encode(str(text), add_special_tokens=False).offsets]

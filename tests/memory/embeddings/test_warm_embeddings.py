"""AXIOM_WARM_EMBEDDINGS loads the model in the background when a process starts."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
PROBE = """
import sys, threading, django
django.setup()
from studio.memory.embeddings import embedding
warm = [t for t in threading.enumerate() if t.name == "warm-embeddings"]
for t in warm:
    t.join(300)
print(len(warm), embedding._embedder is not None, embedding.active_runtime(), "torch" in sys.modules)
"""


def run(env_value: str, **env: str) -> str:
    env = dict(os.environ, DJANGO_SETTINGS_MODULE="tests.settings", AXIOM_WARM_EMBEDDINGS=env_value, **env)
    proc = subprocess.run([sys.executable, "-c", PROBE], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip().splitlines()[-1]


@pytest.mark.slow
def test_warm_start_loads_the_model_in_the_background():
    # auto: ONNX (the export is built under this run's var dir on the first load)
    assert run("1").startswith("1 True onnx ")


@pytest.mark.slow
def test_warm_start_with_the_torch_runtime():
    assert run("1", AXIOM_EMBEDDING_RUNTIME="torch") == "1 True torch True"


def test_off_by_default_nothing_is_loaded():
    assert run("0") == "0 False None False"

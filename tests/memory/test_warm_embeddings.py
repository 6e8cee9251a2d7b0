"""AXIOM_WARM_EMBEDDINGS loads the model in the background when a process starts."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PROBE = """
import threading, django
django.setup()
from studio.memory import embedding
warm = [t for t in threading.enumerate() if t.name == "warm-embeddings"]
for t in warm:
    t.join(120)
print(len(warm), embedding._embedder is not None)
"""


def run(env_value: str) -> str:
    env = dict(os.environ, DJANGO_SETTINGS_MODULE="tests.settings", AXIOM_WARM_EMBEDDINGS=env_value)
    proc = subprocess.run([sys.executable, "-c", PROBE], cwd=ROOT, env=env, capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip().splitlines()[-1]


@pytest.mark.slow
def test_warm_start_loads_the_model_in_the_background():
    assert run("1") == "1 True"


def test_off_by_default_nothing_is_loaded():
    assert run("0") == "0 False"

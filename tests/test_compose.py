"""docker-compose.yml cannot run here (no Docker engine): validate it against the spec."""

import shutil
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent


def test_compose_file_is_valid_against_the_compose_spec():
    exe = shutil.which("check-jsonschema") or str(Path(sys.executable).parent / "check-jsonschema")
    proc = subprocess.run(
        [exe, "--builtin-schema", "vendor.compose-spec", str(ROOT / "docker-compose.yml")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_compose_runs_the_scaled_services():
    spec = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    services = spec["services"]
    assert {"web", "worker", "redis", "postgres", "chroma"} <= set(services)
    assert "gunicorn" in services["web"]["command"]
    assert "celery" in services["worker"]["command"]
    env = services["web"]["environment"]
    assert env["DATABASE_URL"].startswith("postgres://")
    assert env["REDIS_URL"].startswith("redis://")
    assert env["CHROMA_HOST"] == "chroma"
    # The web process and the workers use one image built from the Dockerfile.
    assert services["web"]["build"] == services["worker"]["build"] == "."
    assert (ROOT / "Dockerfile").exists()

"""The Lore Book list counts tokens without importing torch (checked in a fresh process)."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = r"""
import os, sys
import django
django.setup()
from django.core.management import call_command
call_command("migrate", verbosity=0)
from django.contrib.auth.models import Group, User
from django.test import Client
from studio.universes import services
from studio.world.models import Universe
user = User.objects.create_user("a", password="x")
user.groups.add(Group.objects.get_or_create(name="Authors")[0])
universe = Universe.objects.create(name="U", slug="u", owner=user)
services.lore._sync_lore_now = lambda pk: None
services.lore_entry_create(universe=universe, user=user, title="Kaël", kind="character", text="Kaël is a smuggler.")
client = Client()
client.force_login(user)
response = client.get("/universes/u/lore/")
assert response.status_code == 200, response.status_code
assert "all-MiniLM-L6-v2 WordPiece tokens" in response.content.decode()
print("TORCH_LOADED" if "torch" in sys.modules else "TORCH_NOT_LOADED")
"""


def test_list_page_does_not_import_torch():
    workdir = tempfile.mkdtemp(prefix="axiom-notorch-")
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "tests.settings",
        "AXIOM_VAR_DIR": workdir,
        "DATABASE_URL": f"sqlite:///{workdir}/db.sqlite3",
    }
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "TORCH_NOT_LOADED" in proc.stdout

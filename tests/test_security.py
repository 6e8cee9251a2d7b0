"""Production settings and security headers."""

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_pages_carry_a_self_only_csp_and_frame_denial(client, author):
    client.force_login(author)
    response = client.get("/")
    csp = response["Content-Security-Policy"]
    assert "default-src 'self'" in csp and "script-src 'self'" in csp
    assert "unsafe-inline" not in csp and "unsafe-eval" not in csp
    assert response["X-Frame-Options"] == "DENY"
    assert response["X-Content-Type-Options"] == "nosniff"


def test_htmx_does_not_need_inline_styles_or_eval(client, author):
    client.force_login(author)
    html = client.get("/").content.decode()
    assert '"includeIndicatorStyles": false' in html
    assert '"allowEval": false' in html


def test_check_deploy_is_clean_with_production_settings():
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("DJANGO_", "DEBUG", "SECRET_KEY", "SECURE_", "SESSION_COOKIE", "CSRF_COOKIE"))
    }
    env.update(
        DJANGO_SETTINGS_MODULE="studio.settings",
        DEBUG="0",
        SECRET_KEY="x7!Qv2#pL9@wR4$tY8^uI1&oP6*aS3(dF5)gH0_jK2+lZ7-xC9=vB4",
        ALLOWED_HOSTS="studio.example.org",
        # HSTS is off unless configured (docs/deploying.md); a deployment served only over https,
        # subdomains included, sets it (check --deploy warns about each of the three otherwise).
        SECURE_HSTS_SECONDS="3600",
        SECURE_HSTS_INCLUDE_SUBDOMAINS="1",
        SECURE_HSTS_PRELOAD="1",
    )
    proc = subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "no issues" in proc.stdout

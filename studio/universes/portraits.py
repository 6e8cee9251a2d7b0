"""Character portraits: the PNG file a card came in, kept byte for byte.

Stored content-addressed under VAR_DIR/portraits/<sha256>.png (no model, no migration): the
Character entry's `extensions["character_card"]["portrait"]` names the file by its sha256.
Writing the same bytes twice is one file, and a file written by an import that was rolled
back afterwards is only an unused file, never a wrong reference. Portraits are not removed
when an entry is deleted (its revisions may be restored, and other entries may share it).
"""
from __future__ import annotations

import hashlib
import re
from pathlib import Path

SHA_RE = re.compile(r"^[0-9a-f]{64}$")


def _directory() -> Path:
    from django.conf import settings

    path = Path(settings.VAR_DIR) / "portraits"
    path.mkdir(parents=True, exist_ok=True)
    return path


def portrait_store(data: bytes) -> dict:
    """Keep `data`; return the reference an entry stores ({"sha256", "bytes", "content_type"})."""
    digest = hashlib.sha256(data).hexdigest()
    path = _directory() / f"{digest}.png"
    if not path.exists() or path.stat().st_size != len(data):
        tmp = path.with_suffix(".tmp")
        tmp.write_bytes(data)
        tmp.replace(path)
    return {"sha256": digest, "bytes": len(data), "content_type": "image/png"}


def portrait_load(reference) -> bytes | None:
    """Return the bytes a reference names, or None (no reference, missing or altered file)."""
    digest = reference.get("sha256") if isinstance(reference, dict) else None
    if not isinstance(digest, str) or not SHA_RE.match(digest):
        return None
    path = _directory() / f"{digest}.png"
    if not path.exists():
        return None
    data = path.read_bytes()
    return data if hashlib.sha256(data).hexdigest() == digest else None

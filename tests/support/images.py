"""Images the tests upload (persona portraits)."""

from __future__ import annotations

import io

from PIL import Image


def png(width: int = 2, height: int = 2) -> bytes:
    """A real PNG, as Pillow writes it (the studio keeps portraits re-encoded the same way)."""
    out = io.BytesIO()
    Image.new("RGB", (width, height), (120, 40, 200)).save(out, format="PNG")
    return out.getvalue()

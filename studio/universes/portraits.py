"""Character portraits: PNG files decoded with a pixel limit, re-encoded, kept content-addressed.

Every portrait the studio keeps (a persona's upload, a Character Card's PNG) goes through
`portrait_clean` first: Pillow reads the header, a picture of more than
`MAX_PORTRAIT_PIXELS` pixels (a decompression bomb: a small file that inflates to gigabytes
in every member's browser, or a header claiming 2^31 x 2^31) is refused before anything is
decoded, and the pixels are decoded and written again as a plain PNG, so what is served is
an image the studio has read whole, without the file's other chunks (a card's own chunks
are written again on export from the entry, `interchange/card_fields.py`). The size of the
upload itself is capped before Django reads it (`studio/middleware.py`, `RequestSizeLimit`).

Stored content-addressed under VAR_DIR/portraits/<sha256>.png (no model, no migration): a
persona's meta `player_portrait` and a Character entry's
`extensions["character_card"]["portrait"]` name the file by its sha256. Writing the same
bytes twice is one file, and a file written by an import that was rolled back afterwards is
only an unused file, never a wrong reference. A replaced persona portrait is removed by
`portrait_release` once no meta value, entry or lore revision names it any more (entries'
portraits stay while their revisions may be restored).
"""

from __future__ import annotations

import hashlib
import io
import re
from pathlib import Path

SHA_RE = re.compile(r"^[0-9a-f]{64}$")
MAX_PORTRAIT_PIXELS = 4096 * 4096  # 16.7 megapixels: a print-size portrait; decoded it is at most 64 MiB (RGBA)


class PortraitError(ValueError):
    """The bytes are not a PNG the studio keeps (unreadable, or too many pixels)."""


def _directory() -> Path:
    from django.conf import settings

    path = Path(settings.VAR_DIR) / "portraits"
    path.mkdir(parents=True, exist_ok=True)
    return path


def portrait_clean(data: bytes) -> bytes:
    """Return `data` decoded and re-encoded as a PNG; raise PortraitError for what cannot be kept."""
    from PIL import Image

    try:
        with Image.open(io.BytesIO(data), formats=["PNG"]) as image:
            width, height = image.size  # from the header: nothing decoded yet
            if width * height > MAX_PORTRAIT_PIXELS:
                raise PortraitError(
                    f"The portrait is {width} x {height} pixels; at most {MAX_PORTRAIT_PIXELS:,} pixels "
                    "(e.g. 4096 x 4096) are kept."
                )
            image.load()
            if image.mode not in ("1", "L", "LA", "P", "RGB", "RGBA", "I;16"):
                image = image.convert("RGBA")
            out = io.BytesIO()
            image.save(out, format="PNG")
    except PortraitError:
        raise
    except Image.DecompressionBombError:
        raise PortraitError(f"The portrait has too many pixels; at most {MAX_PORTRAIT_PIXELS:,} are kept.") from None
    except (OSError, SyntaxError, ValueError):  # Pillow's errors for what it cannot read
        raise PortraitError("The portrait must be a PNG image (this file cannot be read as one).") from None
    return out.getvalue()


def portrait_store(data: bytes) -> dict:
    """Keep `data` (already cleaned); return the reference an entry stores ({"sha256", "bytes", "content_type"})."""
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


def portrait_release(reference) -> bool:
    """Remove the file a reference names when nothing names it any more; return whether it went.

    Call after the commit that dropped the reference (`transaction.on_commit`): a meta value,
    a lore entry's extensions or a lore revision that still names the digest keeps the file.
    """
    from django.db.models import TextField
    from django.db.models.functions import Cast

    from studio.universes.models import LoreRevision
    from studio.world.models import LoreEntry, UniverseMeta

    digest = reference.get("sha256") if isinstance(reference, dict) else None
    if not isinstance(digest, str) or not SHA_RE.match(digest):
        return False
    if UniverseMeta.objects.filter(value__contains=digest).exists():
        return False
    for model, column in ((LoreEntry, "extensions"), (LoreRevision, "after"), (LoreRevision, "before")):
        if model.objects.annotate(_text=Cast(column, TextField())).filter(_text__contains=digest).exists():
            return False
    path = _directory() / f"{digest}.png"
    path.unlink(missing_ok=True)
    return True

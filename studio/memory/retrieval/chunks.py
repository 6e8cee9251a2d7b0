"""The stored chunk record: its metadata, how a text becomes chunks, and the row callers get.

Metadata of every chunk: save_id (str), turn_id (int), chunk_type (str) -- the core keys,
which always win over the caller's extras -- then entry_id when the chunk has a source row
(a lore entry), whatever `metadata_extra` carried (scalars as they are, lists of scalars as
lists, None dropped, anything else as its str), and the bookkeeping keys chunk_seq (write
order, read by the neighbouring-context arm), chunk_part / chunk_parts (the position of a
long text's piece).

Invariants: a text longer than the embedder's window is split into overlapping pieces of
the same turn (chunking.py), the first piece's id standing for the item; a blank text
stores nothing; chunk_seq grows across calls in one process (microseconds at write time,
plus one per chunk), so write order survives a reload. Chunks are never modified in place:
a change is a new id plus a deleted one, which the corpus cache relies on.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

from studio.memory.embeddings import chunking

CORE_KEYS = ("save_id", "turn_id", "chunk_type")
BOOKKEEPING_KEYS = ("chunk_seq", "chunk_part", "chunk_parts")
LORE = "lore"


def sanitize_metadata(values: dict[str, Any]) -> dict[str, Any]:
    """Return metadata Chroma accepts: scalars as they are, lists of scalars, no None."""
    clean: dict[str, Any] = {}
    for key, value in values.items():
        if value is None:
            continue
        if isinstance(value, (str, int, float, bool)):
            clean[str(key)] = value
        elif isinstance(value, (list, tuple)):
            items = [item for item in value if isinstance(item, (str, int, float, bool))]
            if items:
                clean[str(key)] = [str(item) for item in items] if any(isinstance(i, str) for i in items) else items
        else:
            clean[str(key)] = str(value)
    return clean


def split_for(embedder: Any, text: str) -> list[str]:
    """Split `text` into the pieces `embedder` can read whole (one piece when it fits)."""
    window = min(chunking.DEFAULT_WINDOW, int(getattr(embedder, "max_tokens", chunking.DEFAULT_WINDOW)))
    if len(text) <= window:  # a word piece covers at least one character
        return [text]
    overlap = min(chunking.DEFAULT_OVERLAP, window // 4)
    return chunking.split_text(text, embedder.token_spans(text), window=window, overlap=overlap)


def prepare_chunks(save_id: str, items: list[dict[str, Any]], embedder: Any) -> tuple[list, list, list, list[str]]:
    """Return ids, documents, metadatas and the first chunk id per item ("" if skipped).

    Each item is {turn_id, text, chunk_type?, metadata_extra?} as for
    `VectorMemory.embed_chunks`.
    """
    ids: list[str] = []
    documents: list[str] = []
    metadatas: list[dict[str, Any]] = []
    first_ids: list[str] = []
    seq = time.time_ns() // 1000
    for item in items:
        text = str(item.get("text") or "")
        if not text.strip():
            first_ids.append("")
            continue
        pieces = split_for(embedder, text)
        extra = dict(item.get("metadata_extra") or {})
        for part, piece in enumerate(pieces):
            chunk_id = uuid.uuid4().hex
            metadata = sanitize_metadata(extra)
            metadata.update(
                save_id=str(save_id),
                turn_id=int(item["turn_id"]),
                chunk_type=str(item.get("chunk_type") or "narrative"),
                chunk_seq=seq,
                chunk_part=part,
                chunk_parts=len(pieces),
            )
            seq += 1
            ids.append(chunk_id)
            documents.append(piece)
            metadatas.append(metadata)
            if part == 0:
                first_ids.append(chunk_id)
    return ids, documents, metadatas, first_ids


def lore_items(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Return the chunk items of Lore Book entries: chunk_type "lore", turn 0, entry_id kept.

    Entries with blank text are left out; title and links (the entry ids it links to, read
    by link expansion) go into the metadata when present.
    """
    items = []
    for entry in entries:
        text = str(entry.get("text") or "")
        if not text.strip():
            continue
        extra: dict[str, Any] = {"entry_id": str(entry["entry_id"])}
        if entry.get("title"):
            extra["title"] = str(entry["title"])
        links = [str(link) for link in entry.get("links") or [] if str(link)]
        if links:
            extra["links"] = links
        items.append({"turn_id": 0, "text": text, "chunk_type": LORE, "metadata_extra": extra})
    return items


def result_row(chunk_id: str, text: str, metadata: dict[str, Any]) -> dict[str, Any]:
    """Return the row a caller gets for a chunk: its metadata at top level and under `metadata`.

    id, text, turn_id, chunk_type and entry_id are always present (entry_id None without a
    source row); metadata keys named like the row's own keys never overwrite them.
    """
    metadata = dict(metadata or {})
    row = {key: value for key, value in metadata.items() if key not in ("id", "text", "metadata", "explain")}
    row.update(
        id=chunk_id,
        text=text,
        turn_id=int(metadata.get("turn_id", 0)),
        chunk_type=metadata.get("chunk_type", "narrative"),
        entry_id=metadata.get("entry_id"),
        metadata=metadata,
    )
    return row

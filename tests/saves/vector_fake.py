"""An in-memory stand-in for studio.memory.vector.VectorMemory, with injectable failures.

It keeps the engine's contract that matters to checkpoints: chunks tagged save_id and
turn_id, `rollback` deletes turn_id > target, `copy_save` copies up to a turn, and `query`
honours `max_turn_id` (the rewind horizon every caller passes as the save's current turn).
"""
from __future__ import annotations

import itertools


class VectorStoreDown(ConnectionError):
    pass


class FakeVectorMemory:
    def __init__(self):
        self.chunks: list[dict] = []
        self.fail_rollback = 0  # how many rollback calls fail before one succeeds
        self.fail_copy = 0
        self.calls: list[tuple] = []
        self._ids = itertools.count(1)

    def embed_chunk(self, save_id, turn_id, text, chunk_type="narrative", metadata_extra=None):
        chunk_id = f"c{next(self._ids)}"
        self.chunks.append(
            {"id": chunk_id, "save_id": save_id, "turn_id": int(turn_id), "text": text, "chunk_type": chunk_type}
        )
        return chunk_id

    def rollback(self, save_id, target_turn_id):
        self.calls.append(("rollback", save_id, target_turn_id))
        if self.fail_rollback:
            self.fail_rollback -= 1
            raise VectorStoreDown("vector store unreachable")
        before = len(self.chunks)
        self.chunks = [
            c for c in self.chunks if not (c["save_id"] == save_id and c["turn_id"] > target_turn_id)
        ]
        return before - len(self.chunks)

    def copy_save(self, src_save_id, dst_save_id, max_turn_id=None):
        self.calls.append(("copy_save", src_save_id, dst_save_id, max_turn_id))
        if self.fail_copy:
            self.fail_copy -= 1
            # Fail half-way: some chunks were copied already.
            src = [c for c in self.chunks if c["save_id"] == src_save_id]
            for c in src[: len(src) // 2]:
                self.embed_chunk(dst_save_id, c["turn_id"], c["text"], c["chunk_type"])
            raise VectorStoreDown("vector store unreachable mid-copy")
        copied = 0
        for c in [c for c in self.chunks if c["save_id"] == src_save_id]:
            if max_turn_id is None or c["turn_id"] <= max_turn_id:
                self.embed_chunk(dst_save_id, c["turn_id"], c["text"], c["chunk_type"])
                copied += 1
        return copied

    def update_turn_narrative(self, save_id, turn_id, new_text, chunk_type="narrative"):
        self.calls.append(("update_turn_narrative", save_id, turn_id))
        self.chunks = [
            c
            for c in self.chunks
            if not (c["save_id"] == save_id and c["turn_id"] == turn_id and c["chunk_type"] == chunk_type)
        ]
        self.embed_chunk(save_id, turn_id, new_text, chunk_type)

    def query(self, save_id, query_text, k=5, current_turn_id=None, max_turn_id=None, **kwargs):
        words = set(query_text.lower().split())
        hits = [
            c
            for c in self.chunks
            if c["save_id"] == save_id
            and (max_turn_id is None or c["turn_id"] <= max_turn_id)
            and words & set(c["text"].lower().split())
        ]
        return [{"id": c["id"], "text": c["text"], "turn_id": c["turn_id"]} for c in hits[:k]]

    def turns(self, save_id):
        return sorted({c["turn_id"] for c in self.chunks if c["save_id"] == save_id})

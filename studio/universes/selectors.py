"""Reads for universes: what a user may see, with the rows a page needs."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from django.db.models import Count, Q, QuerySet, Sum, TextField
from django.db.models.functions import Cast, Lower
from django.shortcuts import get_object_or_404

from studio.memory.embeddings.counting import text_counts
from studio.universes.models import LoreRevision
from studio.world.models import EmbeddingState, LoreEntry, Universe

logger = logging.getLogger(__name__)

# Titles sort without regard to case ("ash road" beside "Ashfall", not after "Zed"). SQLite's
# lower() folds ASCII letters only; PostgreSQL folds every letter.
LORE_SORTS = {
    "title": ("Title A-Z", [Lower("title").asc(), "entry_id"]),
    "-title": ("Title Z-A", [Lower("title").desc(), "-entry_id"]),
    "kind": ("Kind", ["kind", Lower("title").asc(), "entry_id"]),
    "-updated_at": ("Recently edited", ["-updated_at", "entry_id"]),
    "-word_count": ("Most words", ["-word_count", "entry_id"]),
    "-token_count": ("Most tokens", ["-token_count", "entry_id"]),
    "entry_id": ("Entry id", ["entry_id"]),
}


def universe_list_for_user(*, user) -> QuerySet[Universe]:
    """Return the universes `user` may see: staff see all, others those they own or belong to."""
    qs = Universe.objects.all()
    if not getattr(user, "is_authenticated", False):
        return qs.none()
    if user.is_staff:
        return qs
    return qs.filter(Q(owner=user) | Q(members=user)).distinct()


def universe_list_with_counts(*, user) -> QuerySet[Universe]:
    return (
        universe_list_for_user(user=user)
        .select_related("owner")
        .annotate(lore_count=Count("lore_entries", distinct=True), save_count=Count("saves", distinct=True))
    )


def universe_delete_summary(*, universe: Universe) -> dict[str, int]:
    """Count what goes with a universe when it is deleted."""
    from studio.world.models import Event

    return {
        "lore_entries": universe.lore_entries.count(),
        "lore_revisions": universe.lore_revisions.count(),
        "meta": universe.meta.count(),
        "saves": universe.saves.count(),
        "events": Event.objects.filter(game_save__universe=universe).count(),
        "memory_tests": universe.memory_tests.count(),
    }


def lore_entry_search(*, universe: Universe, q: str = "", kind: str = "", sort: str = "title") -> QuerySet[LoreEntry]:
    """Return the universe's entries matching a text query and kind, in the chosen order."""
    qs = universe.lore_entries.all()
    if kind:
        qs = qs.filter(kind=kind)
    q = q.strip()
    if q:
        # Keys (aliases) are a JSON list; matching its text form finds an alias like "Kael".
        qs = qs.annotate(keys_text=Cast("keys", TextField())).filter(
            Q(title__icontains=q) | Q(text__icontains=q) | Q(entry_id__icontains=q) | Q(keys_text__icontains=q)
        )
    return qs.order_by(*LORE_SORTS.get(sort, LORE_SORTS["title"])[1])


def lore_rows(qs: QuerySet[LoreEntry]) -> QuerySet[LoreEntry]:
    """Add what a list row shows (link titles both ways) without one query per row."""
    return qs.defer("extensions").prefetch_related(_light("links"), _light("backlinks"))


def with_link_ids(qs: QuerySet[LoreEntry]) -> QuerySet[LoreEntry]:
    """Prefetch each entry's links as (id, entry_id) only: exports and snapshots need no more."""
    from django.db.models import Prefetch

    return qs.prefetch_related(Prefetch("links", queryset=LoreEntry.objects.only("id", "entry_id")))


def _light(name: str):
    from django.db.models import Prefetch

    return Prefetch(name, queryset=LoreEntry.objects.only("id", "entry_id", "title").order_by("title"))


@dataclass
class SemanticResult:
    entries: list[LoreEntry]
    error: str = ""


def lore_semantic_search(*, universe: Universe, q: str, kind: str = "", k: int = 20) -> SemanticResult:
    """Rank entries by meaning through the vector store; say why when it cannot."""
    try:
        from studio.memory.vector import get_vector_memory

        hits = get_vector_memory().query(universe.lore_scope_id, q, k=k, chunk_type="lore")
    except Exception as exc:  # the engine missing or failing must not break the page
        logger.warning("Semantic lore search failed", exc_info=True)
        return SemanticResult([], f"Semantic search is unavailable here ({type(exc).__name__}: {exc}).")
    ranked: list[str] = []
    best: dict[str, dict] = {}  # entry id -> its best-ranked chunk's scores
    for hit in hits or []:
        entry_id = hit.get("entry_id") if isinstance(hit, dict) else None
        if entry_id and entry_id not in ranked:
            ranked.append(entry_id)
            best[entry_id] = {"rank": len(ranked), "score": hit.get("score"), "distance": hit.get("distance")}
    if not ranked:
        return SemanticResult([], "")
    qs = lore_rows(universe.lore_entries.filter(entry_id__in=ranked))
    if kind:
        qs = qs.filter(kind=kind)
    by_id = {e.entry_id: e for e in qs}
    entries = [by_id[i] for i in ranked if i in by_id]
    for entry in entries:
        # What the row shows: the rank among the hits, the search's fused score and the
        # semantic arm's cosine distance (None: found by its words only).
        entry.meaning = best[entry.entry_id]
    return SemanticResult(entries)


def lore_book_totals(*, universe: Universe) -> dict[str, int]:
    """Return entry, word and token totals for the whole Lore Book in one or two queries."""
    totals = universe.lore_entries.aggregate(
        entries=Count("id"),
        words=Sum("word_count"),
        tokens=Sum("token_count"),
        uncounted=Count("id", filter=Q(word_count__isnull=True) | Q(token_count__isnull=True)),
    )
    words, tokens = totals["words"] or 0, totals["tokens"] or 0
    if totals["uncounted"]:
        # Entries written outside the lore services (e.g. the admin) have no stored counts.
        for text, word_count, token_count in universe.lore_entries.filter(
            Q(word_count__isnull=True) | Q(token_count__isnull=True)
        ).values_list("text", "word_count", "token_count"):
            w, t = text_counts(text)
            words += w if word_count is None else 0
            tokens += t if token_count is None else 0
    return {"entries": totals["entries"], "words": words, "tokens": tokens}


def fill_missing_counts(entries) -> None:
    """Compute counts in memory for rows that have none stored (nothing is written)."""
    for entry in entries:
        if entry.word_count is None or entry.token_count is None:
            entry.word_count, entry.token_count = text_counts(entry.text)


def lore_kind_counts(*, universe: Universe) -> dict[str, int]:
    return dict(universe.lore_entries.values_list("kind").annotate(n=Count("id")).values_list("kind", "n"))


def lore_pending_count(*, universe: Universe) -> int:
    return universe.lore_entries.filter(embedding_state=EmbeddingState.PENDING).count()


def lore_embedding_states(*, universe: Universe, pks: list[int]) -> list[dict]:
    return list(universe.lore_entries.filter(pk__in=pks).values("pk", "embedding_state", "embedding_error"))


def lore_entry_get(*, universe: Universe, entry_id: str) -> LoreEntry:
    return get_object_or_404(
        universe.lore_entries.prefetch_related(_light("links"), _light("backlinks")), entry_id=entry_id
    )


def lore_title_index(*, universe: Universe) -> list[tuple[int, str, str]]:
    """Return (pk, entry_id, title) for every entry, for resolving links typed as titles."""
    return list(universe.lore_entries.order_by("title").values_list("pk", "entry_id", "title"))


def lore_revisions_for(*, universe: Universe, entry_id: str) -> QuerySet[LoreRevision]:
    return universe.lore_revisions.filter(entry_id=entry_id).select_related("author")


def lore_deleted_entries(*, universe: Universe, limit: int = 100) -> list[LoreRevision]:
    """Return the latest delete revision of each entry that no longer exists."""
    existing = universe.lore_entries.values("entry_id")
    revisions = (
        universe.lore_revisions.filter(action=LoreRevision.Action.DELETE)
        .exclude(entry_id__in=existing)
        .select_related("author")
        .order_by("-created_at", "-id")
    )
    latest: dict[str, LoreRevision] = {}
    for revision in revisions[: limit * 5]:
        latest.setdefault(revision.entry_id, revision)
    return list(latest.values())[:limit]


def character_names(*, universe: Universe) -> list[str]:
    return list(universe.lore_entries.filter(kind="character").order_by("title").values_list("title", flat=True))

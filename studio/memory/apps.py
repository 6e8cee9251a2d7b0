import threading

from django.apps import AppConfig
from django.conf import settings


class MemoryConfig(AppConfig):
    name = "studio.memory"
    verbose_name = "Memory"

    def ready(self) -> None:
        self.register_job_handlers()
        self.register_timeline_tables()
        self.give_the_embedder_its_settings()
        # A serving process (the run command, gunicorn, a worker) may ask to load the
        # embedding model at start-up, in the background, so the first memory query does
        # not pay the model load (several seconds). Off by default: tests and management
        # commands that never embed should not load torch.
        if getattr(settings, "AXIOM_WARM_EMBEDDINGS", False):
            from studio.memory.embeddings.embedding import get_embedder, preload_embedding_runtime

            preload_embedding_runtime()
            threading.Thread(target=get_embedder, name="warm-embeddings", daemon=True).start()

    @staticmethod
    def register_timeline_tables() -> None:
        """Hand append, rewind, fork, the demo's trim and the save file the engine's per-turn tables (`memory/timeline_tables.py`)."""
        from studio.memory import timeline_tables
        from studio.memory.chapters import timeline as chapter_timeline

        from studio.memory.continuity import timeline_tables as continuity_tables
        from studio.memory.knowledge import timeline_tables as knowledge_tables

        timeline_tables.register()
        chapter_timeline.register()
        knowledge_tables.register()
        continuity_tables.register()

    @staticmethod
    def give_the_embedder_its_settings() -> None:
        """The embedding module reads Django's settings through this reader (it imports no Django)."""
        from studio.memory.embeddings import embedding

        embedding.use_settings(lambda name, default: getattr(settings, name, default))

    @staticmethod
    def register_job_handlers() -> None:
        """Hand the job runner the memory app's handlers (the runner imports no app)."""
        from studio.memory import jobs
        from studio.memory.models import JobKind
        from studio.memory.pipeline import embedding, living, lore

        jobs.register(JobKind.SYNC_LORE, lore.run_sync_lore, on_not_queued=lore.sync_lore_not_queued)
        # A batch of turns is embedded with one model call.
        jobs.register(JobKind.EMBED_TURN, embedding.run_embed_turn, run_batch=embedding.run_embed_batch)
        # A batch of living turns runs one by one in turn order, sharing per-save lookups.
        jobs.register(JobKind.LIVING_TURN, living.run_living_turn, batches_in_order=True)
        jobs.register(JobKind.REFRESH_MODELS, living.run_refresh_models)
        from studio.memory.chapters.summarize import run_summarize_chapter

        jobs.register(JobKind.SUMMARIZE_CHAPTER, run_summarize_chapter)

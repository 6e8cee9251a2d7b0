import threading

from django.apps import AppConfig
from django.conf import settings


class MemoryConfig(AppConfig):
    name = "studio.memory"
    verbose_name = "Memory"

    def ready(self) -> None:
        # A serving process (the run command, gunicorn, a worker) may ask to load the
        # embedding model at start-up, in the background, so the first memory query does
        # not pay the model load (several seconds). Off by default: tests and management
        # commands that never embed should not load torch.
        if getattr(settings, "AXIOM_WARM_EMBEDDINGS", False):
            from studio.memory.embedding import get_embedder, preload_embedding_runtime

            preload_embedding_runtime()
            threading.Thread(target=get_embedder, name="warm-embeddings", daemon=True).start()

from django.apps import AppConfig


class SavesConfig(AppConfig):
    name = "studio.saves"
    verbose_name = "Saves"

    def ready(self) -> None:
        self.register_job_handlers()

    @staticmethod
    def register_job_handlers() -> None:
        """Hand the job runner the vector jobs of rewind and fork (the runner imports no app).

        Immediate kinds: the rewind or fork runs its job right after its commit, and a retry
        runs it at once; failed attempts are retried with the ledger's backoff.
        """
        from studio.memory import jobs
        from studio.memory.models import JobKind
        from studio.saves import vector_jobs

        jobs.register(JobKind.VECTOR_ROLLBACK, vector_jobs.run_vector_rollback, immediate=True)
        jobs.register(JobKind.FORK_VECTORS, vector_jobs.run_fork_vectors, immediate=True)

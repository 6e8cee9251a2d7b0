from django.apps import AppConfig


class SavesConfig(AppConfig):
    name = "studio.saves"
    verbose_name = "Saves"

    def ready(self) -> None:
        self.register_job_handlers()
        self.register_timeline_tables()
        self.register_save_file_sections()

    @staticmethod
    def register_timeline_tables() -> None:
        """Hand append, rewind, fork, the demo's trim and the save file the saves app's per-turn tables (`saves/timeline_tables.py`)."""
        from studio.saves import timeline_tables
        from studio.saves.memory_tests import timeline_tables as memory_test_tables

        timeline_tables.register()
        memory_test_tables.register()

    @staticmethod
    def register_save_file_sections() -> None:
        """Add the optional sections: the narrator's snapshots, the save's play settings, the lore
        activation state, presence and reveals, memory-test results.

        The save file is the saves app's; the engine below it knows no save-file section.
        """
        from studio.saves.narrator import portable
        from studio.saves.portable import register_section
        from studio.saves.portable.sections.knowledge import PRESENCE_SECTION, REVEALS_SECTION
        from studio.saves.portable.sections.lore_activation import LORE_ACTIVATION_SECTION

        register_section(portable.SECTION)
        register_section(portable.PLAY_SETTINGS_SECTION)
        register_section(LORE_ACTIVATION_SECTION)
        from studio.saves.portable.sections.chapters import SECTION as CHAPTERS_SECTION

        register_section(CHAPTERS_SECTION)
        register_section(PRESENCE_SECTION)
        register_section(REVEALS_SECTION)
        from studio.saves.memory_tests.portable import SECTION as MEMORY_TESTS_SECTION

        register_section(MEMORY_TESTS_SECTION)

        from studio.saves.portable.sections.continuity import SECTION as CONTINUITY_SECTION

        register_section(CONTINUITY_SECTION)
        # The memory tests' `no_findings` kind reads the continuity guard's findings through one interface.
        from studio.memory.continuity.selectors import findings_in_turns
        from studio.saves.memory_tests import findings

        findings.register_findings_source(findings_in_turns)

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

"""Admin for living memory. Turn ids, sources and proof counts are read-only: editing one
by hand would break the rewind invariants (sources are the rollback key)."""

from django.contrib import admin

from studio.memory.models import Fact, MentalModel, Observation, RecordedQuery, VectorCorpusChange, VectorCorpusVersion


@admin.register(Fact)
class FactAdmin(admin.ModelAdmin):
    list_display = ("statement", "fact_type", "turn_id", "game_save")
    list_select_related = ("game_save",)
    list_filter = ("fact_type", ("game_save", admin.RelatedOnlyFieldListFilter))
    search_fields = ("statement", "who", "what", "where", "entity_index")
    raw_id_fields = ("game_save",)
    readonly_fields = ("game_save", "turn_id", "created_at")
    list_per_page = 100
    show_full_result_count = False


@admin.register(Observation)
class ObservationAdmin(admin.ModelAdmin):
    list_display = ("statement", "subject", "proof_count", "created_turn_id", "updated_turn_id", "stale", "game_save")
    list_select_related = ("game_save",)
    list_filter = ("stale", ("game_save", admin.RelatedOnlyFieldListFilter))
    search_fields = ("statement", "subject")
    raw_id_fields = ("game_save",)
    readonly_fields = ("game_save", "proof_count", "sources", "history", "created_turn_id", "updated_turn_id")
    list_per_page = 100
    show_full_result_count = False


@admin.register(MentalModel)
class MentalModelAdmin(admin.ModelAdmin):
    list_display = ("subject", "short_summary", "created_turn_id", "updated_turn_id", "stale", "game_save")
    list_select_related = ("game_save",)
    list_filter = ("stale", ("game_save", admin.RelatedOnlyFieldListFilter))
    search_fields = ("subject", "summary")
    raw_id_fields = ("game_save",)
    readonly_fields = ("game_save", "sources", "versions", "created_turn_id", "updated_turn_id")

    @admin.display(description="summary")
    def short_summary(self, obj: MentalModel) -> str:
        return obj.summary[:100]


@admin.register(RecordedQuery)
class RecordedQueryAdmin(admin.ModelAdmin):
    list_display = ("query_text", "turn_id", "game_save", "created_at")
    list_select_related = ("game_save",)
    list_filter = (("game_save", admin.RelatedOnlyFieldListFilter),)
    search_fields = ("query_text",)
    raw_id_fields = ("game_save",)
    readonly_fields = ("game_save", "turn_id", "query_text", "params", "result_ids", "created_at")


@admin.register(VectorCorpusVersion)
class VectorCorpusVersionAdmin(admin.ModelAdmin):
    list_display = ("scope_id", "version", "updated_at")
    search_fields = ("scope_id",)
    readonly_fields = ("scope_id", "version", "updated_at")


@admin.register(VectorCorpusChange)
class VectorCorpusChangeAdmin(admin.ModelAdmin):
    list_display = ("scope_id", "version", "created_at")
    search_fields = ("scope_id",)
    readonly_fields = ("scope_id", "version", "added", "removed", "created_at")


# Jobs and LLM calls (the pipeline's tables) are registered in their own module.
from studio.memory import admin_jobs  # noqa: E402,F401

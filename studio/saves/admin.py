"""Admin for saves and their Event_Log / State_Cache."""

from django.contrib import admin

from studio.saves.models import MemoryTestResult, NarratorSnapshot
from studio.world.models import Event, Save, StateCache


@admin.register(Save)
class SaveAdmin(admin.ModelAdmin):
    list_display = (
        "name",
        "save_id",
        "universe",
        "memory_mode",
        "beliefs_enabled",
        "current_turn",
        "timeline_generation",
        "last_activity_at",
    )
    list_select_related = ("universe",)
    list_filter = ("memory_mode", "beliefs_enabled", "universe")
    search_fields = ("name", "save_id")
    autocomplete_fields = ("universe",)
    raw_id_fields = ("forked_from",)
    # Turn counters and the timeline generation move only through turns, rewinds and forks.
    readonly_fields = (
        "save_id",
        "current_turn",
        "timeline_generation",
        "forked_from",
        "fork_turn",
        "created_at",
        "updated_at",
        "last_activity_at",
    )


@admin.register(Event)
class EventAdmin(admin.ModelAdmin):
    list_display = ("game_save", "turn_id", "short_input", "created_at")
    list_select_related = ("game_save",)
    list_filter = ("game_save",)
    search_fields = ("player_input", "narrative", "game_save__save_id")
    raw_id_fields = ("game_save",)
    readonly_fields = ("game_save", "turn_id", "created_at")
    list_per_page = 100

    @admin.display(description="player input")
    def short_input(self, obj: Event) -> str:
        return obj.player_input[:80]


@admin.register(StateCache)
class StateCacheAdmin(admin.ModelAdmin):
    list_display = ("game_save", "turn_id")
    list_select_related = ("game_save",)
    list_filter = ("game_save",)
    search_fields = ("game_save__save_id",)
    raw_id_fields = ("game_save",)
    readonly_fields = ("game_save", "turn_id")
    list_per_page = 100


@admin.register(NarratorSnapshot)
class NarratorSnapshotAdmin(admin.ModelAdmin):
    """What the narrator saw at each accepted turn; written only by accepting a narration."""

    list_display = ("game_save", "turn_id", "model", "latency_ms", "prompt_tokens", "completion_tokens", "edited")
    list_select_related = ("game_save",)
    search_fields = ("game_save__save_id", "player_input")
    raw_id_fields = ("game_save",)
    readonly_fields = [f.name for f in NarratorSnapshot._meta.fields if f.name != "id"]


@admin.register(MemoryTestResult)
class MemoryTestResultAdmin(admin.ModelAdmin):
    """A memory test's verdict on a save at a turn; written only by a run (studio/saves/memory_tests/)."""

    list_display = ("game_save", "turn_id", "name", "kind", "verdict", "ran_at")
    list_select_related = ("game_save",)
    list_filter = ("verdict", "kind")
    search_fields = ("game_save__save_id", "name", "summary")
    readonly_fields = [f.name for f in MemoryTestResult._meta.fields if f.name != "id"]

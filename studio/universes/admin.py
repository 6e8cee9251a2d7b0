"""Admin for universes: meta and lore edited inline under their universe."""

from django.contrib import admin

from studio.universes.models import LoreRevision, MemoryTest
from studio.world.models import LoreEntry, Universe, UniverseMeta


class UniverseMetaInline(admin.TabularInline):
    model = UniverseMeta
    extra = 0


class LoreEntryInline(admin.StackedInline):
    model = LoreEntry
    extra = 0
    fields = ("entry_id", "title", "kind", "text", "keys")
    show_change_link = True
    classes = ("collapse",)


@admin.register(Universe)
class UniverseAdmin(admin.ModelAdmin):
    list_display = ("name", "slug", "owner", "created_at", "updated_at")
    list_select_related = ("owner",)
    search_fields = ("name", "slug", "description")
    prepopulated_fields = {"slug": ("name",)}
    raw_id_fields = ("owner",)
    filter_horizontal = ("members",)
    inlines = (UniverseMetaInline, LoreEntryInline)


@admin.register(UniverseMeta)
class UniverseMetaAdmin(admin.ModelAdmin):
    list_display = ("universe", "key", "short_value")
    list_select_related = ("universe",)
    list_filter = ("universe",)
    search_fields = ("key", "value")
    autocomplete_fields = ("universe",)

    @admin.display(description="value")
    def short_value(self, obj: UniverseMeta) -> str:
        return obj.value[:80]


@admin.register(LoreEntry)
class LoreEntryAdmin(admin.ModelAdmin):
    list_display = ("title", "entry_id", "kind", "universe", "embedding_state", "updated_at")
    list_select_related = ("universe",)
    list_filter = ("kind", "embedding_state", "universe")
    search_fields = ("title", "entry_id", "text")
    autocomplete_fields = ("universe",)
    raw_id_fields = ("links",)
    readonly_fields = ("embedding_state", "embedding_error", "created_at", "updated_at")
    list_per_page = 100


@admin.register(LoreRevision)
class LoreRevisionAdmin(admin.ModelAdmin):
    list_display = ("entry_id", "action", "universe", "author", "created_at")
    list_select_related = ("universe", "author")
    list_filter = ("action", "universe")
    search_fields = ("entry_id",)
    readonly_fields = ("universe", "lore_entry", "entry_id", "action", "before", "after", "author", "created_at")


@admin.register(MemoryTest)
class MemoryTestAdmin(admin.ModelAdmin):
    """A universe's memory tests, read here; they are written on the Tests page, the API or Universe-as-Code,
    where `parse_spec` checks them."""

    list_display = ("name", "kind", "universe", "turn", "until_turn", "updated_at")
    list_select_related = ("universe",)
    list_filter = ("kind", "universe")
    search_fields = ("name", "description")
    readonly_fields = [f.name for f in MemoryTest._meta.fields if f.name != "id"]

    def has_add_permission(self, request) -> bool:
        return False

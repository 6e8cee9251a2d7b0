"""Admin for API tokens: staff can see, create and revoke them; the key is never stored."""

from django.contrib import admin, messages
from django.utils import timezone

from studio.api.models import ApiToken
from studio.api.services import generate_key


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    list_display = ("name", "user", "prefix", "created_at", "last_used_at", "revoked_at")
    list_select_related = ("user",)
    list_filter = (("revoked_at", admin.EmptyFieldListFilter),)
    search_fields = ("name", "prefix", "user__username")
    raw_id_fields = ("user",)
    readonly_fields = ("prefix", "created_at", "last_used_at")
    fields = ("user", "name", "prefix", "created_at", "last_used_at", "revoked_at")
    actions = ["revoke"]

    def save_model(self, request, obj, form, change):
        if not change:
            # A new token gets its key here; the admin shows it once in a message.
            key, obj.prefix, obj.key_hash = generate_key()
            super().save_model(request, obj, form, change)
            self.message_user(
                request,
                f"Token key (shown once, copy it now): {key}",
                level=messages.WARNING,
            )
            return
        super().save_model(request, obj, form, change)

    @admin.action(description="Revoke selected tokens")
    def revoke(self, request, queryset):
        count = queryset.filter(revoked_at__isnull=True).update(revoked_at=timezone.now())
        self.message_user(request, f"{count} token(s) revoked.")

"""Admin for background jobs and the LLM call log (imported by studio/memory/admin.py)."""

from __future__ import annotations

from django.contrib import admin, messages

from studio.memory.jobs import JobNotRetryable, job_retry
from studio.memory.models import Job, LLMCall


@admin.register(Job)
class JobAdmin(admin.ModelAdmin):
    list_display = (
        "id",
        "kind",
        "status",
        "game_save",
        "universe",
        "turn_id",
        "attempts",
        "llm_calls",
        "llm_tokens",
        "progress",
        "created_at",
        "finished_at",
    )
    list_select_related = ("game_save", "universe")
    list_filter = ("status", "kind", ("universe", admin.RelatedOnlyFieldListFilter))
    search_fields = ("progress", "error", "game_save__save_id", "task_id")
    raw_id_fields = ("game_save", "universe")
    readonly_fields = (
        "kind",
        "universe",
        "game_save",
        "turn_id",
        "timeline_generation",
        "status",
        "progress",
        "error",
        "attempts",
        "payload",
        "result",
        "llm_calls",
        "llm_tokens",
        "task_id",
        "created_at",
        "started_at",
        "finished_at",
    )
    date_hierarchy = "created_at"
    list_per_page = 100
    show_full_result_count = False
    actions = ["retry_jobs"]

    def has_add_permission(self, request) -> bool:
        return False

    @admin.action(description="Retry the selected failed, skipped or paused jobs")
    def retry_jobs(self, request, queryset):
        retried = 0
        for job in queryset:
            try:
                job_retry(job=job)
            except JobNotRetryable:  # queued, running or done: left as it is
                continue
            retried += 1
        self.message_user(request, f"{retried} job(s) queued again.", messages.SUCCESS)


@admin.register(LLMCall)
class LLMCallAdmin(admin.ModelAdmin):
    list_display = (
        "created_at",
        "operation",
        "model",
        "prompt_tokens",
        "completion_tokens",
        "latency_ms",
        "game_save",
        "job",
        "user",
        "refused",
        "short_error",
    )
    list_select_related = ("game_save", "job", "user")
    list_filter = (
        "operation",
        "refused",
        "model",
        ("game_save", admin.RelatedOnlyFieldListFilter),
        ("user", admin.RelatedOnlyFieldListFilter),
    )
    search_fields = ("model", "error", "game_save__save_id")
    raw_id_fields = ("game_save", "job", "user")
    readonly_fields = (
        "game_save",
        "job",
        "user",
        "refused",
        "operation",
        "model",
        "prompt_tokens",
        "completion_tokens",
        "latency_ms",
        "error",
        "created_at",
    )
    date_hierarchy = "created_at"
    list_per_page = 100
    show_full_result_count = False

    def has_add_permission(self, request) -> bool:
        return False

    @admin.display(description="error")
    def short_error(self, obj: LLMCall) -> str:
        return obj.error[:80]

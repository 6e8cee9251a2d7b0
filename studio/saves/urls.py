from django.urls import path

from studio.saves.views import imports, narrator, play, rewind, saves, timeline
from studio.saves.views import chapters as chapter_views
from studio.saves.views import portable as portable_views

app_name = "saves"

urlpatterns = [
    path("", saves.save_list, name="list"),
    path("new/", saves.save_create, name="create"),
    path("import/transcript/", imports.import_transcript, name="import_transcript"),
    path("import/locomo/", imports.import_locomo, name="import_locomo"),
    path("import/save/", portable_views.save_import, name="import_save"),
    path("<str:save_id>/", saves.save_detail, name="detail"),
    path("<str:save_id>/turns/", saves.turn_append, name="turn_append"),
    path("<str:save_id>/timeline/", timeline.timeline, name="timeline"),
    path("<str:save_id>/turns/<int:turn_id>/", timeline.turn_detail, name="turn_detail"),
    path("<str:save_id>/turns/<int:turn_id>/edit/", timeline.turn_edit, name="turn_edit"),
    path("<str:save_id>/rewind/", rewind.rewind, name="rewind"),
    path("<str:save_id>/rewind/preview/", rewind.rewind_preview, name="rewind_preview"),
    path("<str:save_id>/rewind/confirm/", rewind.rewind_confirm, name="rewind_confirm"),
    path("<str:save_id>/rewind/summary/", rewind.rewind_summary, name="rewind_summary"),
    path("<str:save_id>/fork/", rewind.fork, name="fork"),
    path("<str:save_id>/export/", portable_views.save_export, name="export"),
    path("<str:save_id>/chapters/", chapter_views.chapters, name="chapters"),
    path("<str:save_id>/chapters/close/", chapter_views.chapter_close_view, name="chapter_close"),
    path("<str:save_id>/chapters/<int:chapter_id>/", chapter_views.chapter_edit, name="chapter_edit"),
    # The narrator (studio/saves/views/narrator.py).
    path("<str:save_id>/narrator/", narrator.narrate, name="narrate"),
    path("<str:save_id>/narrator/prompt/", narrator.narrator_prompt, name="narrator_prompt"),
    path("<str:save_id>/narrator/<int:draft_id>/", narrator.narrator_draft, name="narrator_draft"),
    path(
        "<str:save_id>/narrator/<int:draft_id>/stream/<int:number>/", narrator.narrator_stream, name="narrator_stream"
    ),
    path("<str:save_id>/narrator/<int:draft_id>/regenerate/", narrator.narrator_regenerate, name="narrator_regenerate"),
    path("<str:save_id>/narrator/<int:draft_id>/choose/", narrator.narrator_choose, name="narrator_choose"),
    path("<str:save_id>/narrator/<int:draft_id>/discard/", narrator.narrator_discard, name="narrator_discard"),
    path("<str:save_id>/narrator/<int:draft_id>/accept/", narrator.narrator_accept, name="narrator_accept"),
    path("<str:save_id>/turns/<int:turn_id>/narrator/", narrator.narrator_snapshot, name="narrator_snapshot"),
    # The play controls (studio/saves/views/play.py).
    path("<str:save_id>/narrator/opening/", play.narrator_opening, name="narrator_opening"),
    path("<str:save_id>/narrator/impersonate/", play.narrator_impersonate, name="narrator_impersonate"),
    path("<str:save_id>/narrator/<int:draft_id>/continue/", play.narrator_continue, name="narrator_continue"),
    path("<str:save_id>/narrator/<int:draft_id>/stop/<int:number>/", play.narrator_stop, name="narrator_stop"),
    path("<str:save_id>/turns/last/undo/", play.turn_undo, name="turn_undo"),
    path("<str:save_id>/turns/last/retry/", play.turn_retry, name="turn_retry"),
    path("<str:save_id>/turns/last/swipe/", play.turn_swipe, name="turn_swipe"),
    path("<str:save_id>/narrator/<int:draft_id>/restore/", play.draft_restore, name="draft_restore"),
    path("<str:save_id>/play-settings/", play.play_settings, name="play_settings"),
]

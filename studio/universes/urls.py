from django.urls import path

from studio.universes import views

app_name = "universes"

urlpatterns = [
    path("", views.universe_list, name="list"),
    path("new/", views.universe_create, name="create"),
    path("import/", views.toml_import, name="toml_import"),
    path("<slug:slug>/", views.universe_detail, name="detail"),
    path("<slug:slug>/rename/", views.universe_rename, name="rename"),
    path("<slug:slug>/delete/", views.universe_delete, name="delete"),
    # Universe_Meta
    path("<slug:slug>/meta/", views.meta_page, name="meta"),
    path("<slug:slug>/meta/save/", views.meta_save, name="meta_save"),
    path("<slug:slug>/meta/<int:pk>/edit/", views.meta_edit, name="meta_edit"),
    path("<slug:slug>/meta/<int:pk>/delete/", views.meta_delete, name="meta_delete"),
    path("<slug:slug>/meta/persona/", views.persona_save, name="persona_save"),
    path("<slug:slug>/meta/persona/portrait.png", views.persona_portrait, name="persona_portrait"),
    path("<slug:slug>/meta/opening/", views.opening_save, name="opening_save"),
    # Missions
    path("<slug:slug>/missions/", views.missions_page, name="missions"),
    path("<slug:slug>/missions/universe/", views.missions_universe, name="missions_universe"),
    path("<slug:slug>/missions/table/", views.missions_table, name="missions_table"),
    path("<slug:slug>/missions/text/", views.missions_text, name="missions_text"),
    # Import / export
    path("<slug:slug>/exchange/", views.exchange_page, name="exchange"),
    path("<slug:slug>/exchange/import/", views.lore_import, name="lore_import"),
    path("<slug:slug>/export.toml", views.export_toml, name="export_toml"),
    path("<slug:slug>/export/world-info.json", views.export_sillytavern, name="export_sillytavern"),
    path("<slug:slug>/export/card.json", views.export_card, name="export_card"),
    path("<slug:slug>/export/card.png", views.export_card_png, name="export_card_png"),
    # Lore Book
    path("<slug:slug>/lore/", views.lore_list, name="lore_list"),
    path("<slug:slug>/lore/new/", views.lore_create, name="lore_create"),
    path("<slug:slug>/lore/bulk/", views.lore_bulk, name="lore_bulk"),
    path("<slug:slug>/lore/status/", views.lore_status, name="lore_status"),
    path("<slug:slug>/lore/deleted/", views.lore_deleted, name="lore_deleted"),
    path("<slug:slug>/lore/tester/", views.lore_tester, name="lore_tester"),
    path("<slug:slug>/lore/health/", views.lore_health_page, name="lore_health"),
    path("<slug:slug>/lore/<slug:entry_id>/", views.lore_detail, name="lore_detail"),
    path("<slug:slug>/lore/<slug:entry_id>/row/", views.lore_row, name="lore_row"),
    path("<slug:slug>/lore/<slug:entry_id>/edit/", views.lore_edit, name="lore_edit"),
    path("<slug:slug>/lore/<slug:entry_id>/delete/", views.lore_delete, name="lore_delete"),
    path("<slug:slug>/lore/<slug:entry_id>/history/", views.lore_history, name="lore_history"),
    path(
        "<slug:slug>/lore/<slug:entry_id>/history/<int:revision_id>/restore/",
        views.lore_restore,
        name="lore_restore",
    ),
]

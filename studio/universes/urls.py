from django.urls import path

from studio.universes import views

app_name = "universes"

urlpatterns = [
    path("", views.universe_list, name="list"),
    path("<slug:slug>/", views.universe_detail, name="detail"),
    path("<slug:slug>/lore/<slug:entry_id>/", views.lore_detail, name="lore_detail"),
]

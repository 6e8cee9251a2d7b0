"""URL configuration: the studio pages, the admin, the JSON API and the memory proxy (`/v1/`)."""

from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path

from studio import views

urlpatterns = [
    path("", views.home, name="home"),
    path("healthz", views.healthz, name="healthz"),
    path("favicon.ico", views.favicon, name="favicon"),
    path("accounts/login/", auth_views.LoginView.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("universes/", include("studio.universes.urls")),
    path("saves/", include("studio.saves.urls")),
    path("memory/", include("studio.inspector.urls")),
    path("accounts/tokens/", include("studio.api.account_urls")),
    path("api/v1/", include("studio.api.urls")),
    path("v1/", include("studio.proxy.urls")),
    path("admin/", admin.site.urls),
]

admin.site.site_header = "Axiom Studio administration"
admin.site.site_title = "Axiom Studio admin"

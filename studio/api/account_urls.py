"""Studio pages for a user's API tokens, mounted at /accounts/tokens/ (outside /api/)."""

from django.urls import path

from studio.api import account_views

app_name = "api_tokens"

urlpatterns = [
    path("", account_views.token_list, name="list"),
    path("create/", account_views.token_create, name="create"),
    path("<int:token_id>/revoke/", account_views.token_revoke, name="revoke"),
]

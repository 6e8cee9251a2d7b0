"""`/v1/`: the memory proxy's OpenAI-compatible endpoints (docs/proxy.md)."""

from django.urls import path

from studio.proxy import views

app_name = "proxy"

urlpatterns = [
    path("chat/completions", views.chat_completions, name="chat_completions"),
    path("models", views.models, name="models"),
]

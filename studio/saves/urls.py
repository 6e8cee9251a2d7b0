from django.urls import path

from studio.saves import views

app_name = "saves"

urlpatterns = [
    path("", views.save_list, name="list"),
    path("<str:save_id>/", views.save_detail, name="detail"),
]

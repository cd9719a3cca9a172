from django.contrib import admin
from django.urls import include, path

from example_project.views import home

urlpatterns = [
    path("", home, name="home"),
    path("admin/", admin.site.urls),
    path("api/memory/", include("agentmemory.api.urls")),
]

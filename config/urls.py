"""Project URLs: API, schema and docs, console (admin), health probes."""

from django.contrib import admin
from django.urls import include, path, re_path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

from config import errors, health

handler404 = "config.errors.handler404"
handler500 = "config.errors.handler500"

urlpatterns = [
    path("api/schema", SpectacularAPIView.as_view(), name="schema"),
    path("api/schema/", SpectacularAPIView.as_view()),
    path("api/docs", SpectacularSwaggerView.as_view(url_name="schema"), name="docs"),
    path("api/docs/", SpectacularSwaggerView.as_view(url_name="schema")),
    path("api/", include("breakpoints.api.urls")),
    re_path(r"^api/", errors.api_not_found),
    path("admin/", admin.site.urls),
    path("healthz", health.healthz, name="healthz"),
    path("readyz", health.readyz, name="readyz"),
]

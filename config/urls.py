"""Project URLs: API, schema and docs, console (admin), health probes."""

from django.contrib import admin
from django.urls import include, path, re_path
from django.views.generic import RedirectView
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView
from rest_framework.permissions import AllowAny

from ops import health, jwks, metrics
from web import errors

handler404 = "web.errors.handler404"
handler500 = "web.errors.handler500"

# The schema and docs are public: no credentials are checked (a stale token must not turn
# them into a 401), and the docs page is only ever fetched.
PUBLIC = {"authentication_classes": [], "permission_classes": [AllowAny]}
schema_view = SpectacularAPIView.as_view(**PUBLIC)
docs_view = SpectacularSwaggerView.as_view(
    url_name="schema", http_method_names=["get", "head"], **PUBLIC
)

urlpatterns = [
    # People who open the service's address land in the console (its login when signed out).
    path("", RedirectView.as_view(pattern_name="admin:index"), name="home"),
    path("api/schema", schema_view, name="schema"),
    path("api/schema/", schema_view),
    path("api/docs", docs_view, name="docs"),
    path("api/docs/", docs_view),
    path("api/", include("breakpoints.api.urls")),
    path("api/", include("policies.api.urls")),
    path("api/", include("grants.api.urls")),
    path("api/", include("triggers.api.urls")),
    re_path(r"^api/", errors.api_not_found),
    path("admin/", admin.site.urls),
    path("", include("channels.urls")),
    path("oidc/", include("sso.urls")),  # single sign-on (404 while it is off)
    path("healthz", health.healthz, name="healthz"),
    path("readyz", health.readyz, name="readyz"),
    path("metrics", metrics.metrics_view, name="metrics"),
    path(".well-known/jwks.json", jwks.JwksView.as_view(), name="jwks"),
]

"""The policies' API routes (rules, notification routes); every path works with and
without a trailing slash, like the other apps' (config.urls mounts them under api/)."""

from rest_framework.routers import SimpleRouter

from policies.api.routes import RouteViewSet
from policies.api.rules import RuleViewSet

router = SimpleRouter()
router.trailing_slash = "/?"  # the constructor only takes a boolean
# List-level actions (rules/evaluate) route before the detail route (rules/{id}).
router.register("rules", RuleViewSet, basename="rule")
router.register("routes", RouteViewSet, basename="route")

urlpatterns = router.urls

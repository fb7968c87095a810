"""API routes; every path works with and without a trailing slash."""

from rest_framework.routers import SimpleRouter

from breakpoints.api.views import BreakpointViewSet
from policies.api.routes import RouteViewSet
from policies.api.rules import RuleViewSet

router = SimpleRouter()
router.trailing_slash = "/?"  # the constructor only takes a boolean
router.register("breakpoints", BreakpointViewSet, basename="breakpoint")
# List-level actions (rules/evaluate) route before the detail route (rules/{id}).
router.register("rules", RuleViewSet, basename="rule")
router.register("routes", RouteViewSet, basename="route")

urlpatterns = router.urls

"""The breakpoints' API routes; every path works with and without a trailing slash."""

from rest_framework.routers import SimpleRouter

from breakpoints.api.views import BreakpointViewSet

router = SimpleRouter()
router.trailing_slash = "/?"  # the constructor only takes a boolean
router.register("breakpoints", BreakpointViewSet, basename="breakpoint")

urlpatterns = router.urls

"""The grants' API routes (mounted under api/); with and without a trailing slash."""

from rest_framework.routers import SimpleRouter

from grants.api.views import GrantViewSet

router = SimpleRouter()
router.trailing_slash = "/?"  # the constructor only takes a boolean
router.register("grants", GrantViewSet, basename="grant")

urlpatterns = router.urls

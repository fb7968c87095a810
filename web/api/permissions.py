"""Who may call the API at all; finer rules live in the services."""

from rest_framework.permissions import BasePermission
from rest_framework.viewsets import GenericViewSet

from core.actors import AgentPrincipal, is_admin, is_reviewer
from web.api.schema import EnvelopedListSchema


class IsAgentOrReviewer(BasePermission):
    message = "This endpoint needs an agent token or a reviewer/admin account."

    def has_permission(self, request, view) -> bool:
        user = request.user
        return isinstance(user, AgentPrincipal) or is_reviewer(user)


class IsPersonDeciding(BasePermission):
    """A decision's door: any signed-in person may ask (the service refuses one who is not a
    reviewer, and records it, as on every channel); agents may not, and reading the
    endpoint (OPTIONS) stays for reviewers."""

    message = "Only reviewers and admins may do this."

    def has_permission(self, request, view) -> bool:
        user = request.user
        if request.method != "POST":
            return is_reviewer(user)
        return bool(user and user.is_authenticated) and not isinstance(user, AgentPrincipal)


class IsReviewer(BasePermission):
    """Reviewers and admins: the queue's reads (its groups)."""

    message = "Only reviewers and admins may do this."

    def has_permission(self, request, view) -> bool:
        return is_reviewer(request.user)


class IsAdmin(BasePermission):
    message = "Only admins may do this."

    def has_permission(self, request, view) -> bool:
        return is_admin(request.user)


class AdminViewSet(GenericViewSet):
    """The admins' configuration endpoints (rules, routes, event sources, trigger rules):
    admins only, a `list` answering {"results": [...]}, no paging or filters (few rows)."""

    schema = EnvelopedListSchema()
    permission_classes = [IsAdmin]
    pagination_class = None
    filterset_class = None
    filter_backends: list = []

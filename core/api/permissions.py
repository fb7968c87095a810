"""Who may call the API at all; finer rules live in the services."""

from rest_framework.permissions import BasePermission
from rest_framework.viewsets import GenericViewSet

from core.actors import AgentPrincipal, is_admin, is_reviewer
from core.api.schema import EnvelopedListSchema


class IsAgentOrReviewer(BasePermission):
    message = "This endpoint needs an agent token or a reviewer/admin account."

    def has_permission(self, request, view) -> bool:
        user = request.user
        return isinstance(user, AgentPrincipal) or is_reviewer(user)


class IsReviewer(BasePermission):
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

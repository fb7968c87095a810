"""Who may call the breakpoint API at all; finer rules live in the services."""

from rest_framework.permissions import BasePermission

from breakpoints.actors import AgentPrincipal, is_admin, is_reviewer


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

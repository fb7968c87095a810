"""The grants API: reviewers list and revoke their own grants, admins every one."""

from typing import Any

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers, viewsets
from rest_framework.permissions import BasePermission
from rest_framework.request import Request
from rest_framework.response import Response

from core.actors import actor_for_request_user, is_reviewer
from grants import selectors, services
from grants.api.serializers import GrantSerializer
from grants.models import GrantStatus
from web.api.fields import NoBody
from web.api.pagination import BreakpointCursorPagination
from web.api.views import error_responses, validated

STATUSES = (GrantStatus.LIVE, "ended")


class GrantCursorPagination(BreakpointCursorPagination):
    """Newest first, always (grant_granter_created, grant_created): no `ordering`."""

    def get_ordering(self, request, queryset, view):
        return self.ordering

    def get_schema_operation_parameters(self, view):
        parameters = super().get_schema_operation_parameters(view)
        return [parameter for parameter in parameters if parameter["name"] != "ordering"]


class GrantQuerySerializer(serializers.Serializer):
    status = serializers.ChoiceField(choices=STATUSES, required=False)


class IsReviewer(BasePermission):
    """Reviewers and admins (agents and people without a role: 403); the services hold the
    finer rules (a reviewer's own grants)."""

    message = "Only reviewers and admins may do this."

    def has_permission(self, request, view) -> bool:
        return is_reviewer(request.user)


class GrantViewSet(viewsets.GenericViewSet):
    serializer_class = GrantSerializer
    permission_classes = [IsReviewer]
    pagination_class = GrantCursorPagination
    filter_backends: list = []
    lookup_value_regex = r"[^/\x00]+"

    def get_queryset(self):  # the schema generator asks
        return selectors.grant_list(actor=actor_for_request_user(self.request.user))

    @extend_schema(
        summary="List grants",
        description="Reviewers: the grants they gave; admins: every grant. Newest first.",
        parameters=[
            OpenApiParameter(
                "status",
                {"type": "string", "enum": list(STATUSES)},
                description="live: still applying; ended: revoked, used up or expired "
                "(left out: all; empty: 400).",
            )
        ],
        responses={200: GrantSerializer(many=True), **error_responses(400, 401, 403)},
    )
    def list(self, request: Request) -> Response:
        # A plain dict: DRF would read an empty value of a query string as "not given".
        query = GrantQuerySerializer(data=request.query_params.dict())
        query.is_valid(raise_exception=True)
        grants = selectors.grant_list(
            actor=actor_for_request_user(request.user), status=query.validated_data.get("status")
        )
        page = self.paginate_queryset(grants)
        return self.get_paginated_response(GrantSerializer(page, many=True).data)

    @extend_schema(
        summary="Get a grant",
        description="Its granter's, or any for admins (another reviewer's: 403).",
        responses={200: GrantSerializer, **error_responses(401, 403, 404)},
    )
    def retrieve(self, request: Request, pk: str) -> Response:
        grant = selectors.grant_get(actor=actor_for_request_user(request.user), grant_id=pk)
        return Response(GrantSerializer(grant).data)

    @extend_schema(
        summary="Revoke a grant",
        description="Its granter or an admin; it approves nothing more. Revoked already: 409.",
        request=NoBody,
        responses={200: GrantSerializer, **error_responses(400, 401, 403, 404, 409)},
    )
    def destroy(self, request: Request, pk: str, *args: Any) -> Response:
        validated(NoBody, request)
        grant = services.grant_revoke(actor=actor_for_request_user(request.user), grant_id=pk)
        return Response(GrantSerializer(grant).data)

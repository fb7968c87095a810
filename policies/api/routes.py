"""The notification routes API (admins): list, add, read, replace and remove routes.

Every write goes through policies.routes with the admin as actor: its validator
(policies.routes.route_problems) is the only one, the console's too. Here the body's
schema is declared, unknown keys refused (StrictBody), and the service's problems named
together with the fields' own in one 400.
"""

import re
from collections.abc import Mapping
from typing import Any

from drf_spectacular.extensions import OpenApiSerializerFieldExtension
from drf_spectacular.utils import (
    OpenApiParameter,
    OpenApiResponse,
    extend_schema,
    extend_schema_field,
)
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response

from core import limits
from core.actors import actor_for_request_user
from core.channels import channel_providers
from core.choices import OnTimeout
from core.exceptions import NotFound
from policies.api.rules import RulePatternField
from policies.api.schema import ESCALATE_TO_DESCRIPTION
from policies.models import NotificationRoute
from policies.routes import (
    TAKEN,
    route_add,
    route_problems,
    route_remove,
    route_update,
)
from web.api.fields import (
    NoBody,
    StrictBody,
    StrictBooleanField,
    StrictCharField,
    UtcDateTimeField,
)
from web.api.permissions import AdminViewSet
from web.api.schema import text_schema
from web.api.views import error_responses, validated

# --- the documented shapes -----------------------------------------------------------

# An id below 2**63 (any database's integer key); anything else is simply not found.
ROUTE_ID = re.compile(r"[1-9][0-9]{0,17}")
ROUTE_ID_PARAMETER = OpenApiParameter(
    "id",
    {"type": "integer", "minimum": 1, "maximum": 10**18 - 1},
    OpenApiParameter.PATH,
    description="The route's id.",
)


def channels_schema() -> dict[str, Any]:
    """A route's channels: one of the shapes each channel's specs take (core.channels)."""
    shapes = [shape for channel in channel_providers().values() for shape in channel.spec_schemas()]
    return {
        "type": "array",
        "minItems": 1,
        "maxItems": limits.MAX_ROUTE_CHANNELS,
        "items": {"oneOf": shapes},
        # Kept word for word: the published OpenAPI schema does not change.
        "description": "Where the matching breakpoints are announced. Routed experts are the "
        "users holding a seat of payload.expert (their Django email; Slack finds them by it).",
    }


DEFAULTS_SCHEMA = {
    "type": "object",
    "additionalProperties": False,
    "description": "Filled into a matching breakpoint whose payload leaves them out (the "
    "first matching route by name wins per key).",
    "properties": {
        "onTimeout": {"type": "string", "enum": list(OnTimeout.values)},
        "escalateAfterSeconds": {
            "type": "integer",
            "minimum": 1,
            "maximum": limits.MAX_TTL_SECONDS,
        },
        "escalateTo": text_schema(limits.MAX_EXPERT_NAME_LENGTH, ESCALATE_TO_DESCRIPTION),
        "remindEverySeconds": {
            "type": "integer",
            "minimum": limits.MIN_REMIND_EVERY_SECONDS,
            "maximum": limits.MAX_TTL_SECONDS,
        },
        "preventSelfReview": {
            "type": "boolean",
            "description": "Refuse a decision by the breakpoint's requestedBy (four eyes).",
        },
    },
}


class ChannelsField(serializers.JSONField):
    """The channel specs as sent; RouteWriteSerializer checks them whole (errors by index)."""


class ChannelsFieldSchema(OpenApiSerializerFieldExtension):
    """ChannelsField's schema, built when the schema is: the channels are loaded by then."""

    target_class = ChannelsField

    def map_serializer_field(self, auto_schema: Any, direction: str) -> dict[str, Any]:
        return channels_schema()


@extend_schema_field(DEFAULTS_SCHEMA)
class DefaultsField(serializers.JSONField):
    pass


class RouteSerializer(serializers.ModelSerializer):
    channels = ChannelsField()
    defaults = DefaultsField()
    createdBy = serializers.CharField(source="created_by")
    createdAt = UtcDateTimeField(source="created_at")

    class Meta:
        model = NotificationRoute
        fields = ["id", "name", "pattern", "channels", "defaults", "enabled", "createdBy", "createdAt"]  # fmt: skip
        read_only_fields = fields


class RouteListSerializer(serializers.Serializer):
    results = RouteSerializer(many=True)


class RouteWriteSerializer(StrictBody):
    """A whole route: to add one, or to replace one (PUT)."""

    name = StrictCharField(max_length=limits.MAX_ROUTE_NAME_LENGTH, help_text="Unique.")
    pattern = RulePatternField(
        trim_whitespace=False,  # error positions count from the first character sent
        max_length=limits.MAX_PATTERN_LENGTH,
        help_text="The rule pattern language: a key glob with `*`, optionally with "
        "predicates: `deploy.*(tags contains 'prod' AND expert = 'owner')`.",
    )
    channels = ChannelsField()
    defaults = DefaultsField(required=False)
    enabled = StrictBooleanField(required=False, default=True)

    def extra_problems(self, data: Mapping, errors: Mapping) -> dict[str, list[str]]:
        """The service's problems (a channel's shape, a default, a malformed pattern, a taken
        name), so that one 400 names them all."""
        fields = {key: data.get(key) for key in ("name", "pattern", "channels", "defaults")}
        service = route_problems(**fields, route_id=self.context.get("route_id"))
        if service == {"name": [TAKEN]} and not errors:
            return {}  # a taken name alone: the service's 409
        return {key: messages for key, messages in service.items() if key not in errors}


# --- views -----------------------------------------------------------------------------


def _route_id(pk: str) -> int:
    if not ROUTE_ID.fullmatch(pk):
        raise NotFound("Route not found.")
    return int(pk)


def _route_body(body: Any, route_id: int | None = None) -> dict[str, Any]:
    """The validated body of a route write (`route_id`: the route it replaces)."""
    serializer = RouteWriteSerializer(data=body, context={"route_id": route_id})
    serializer.is_valid(raise_exception=True)
    return serializer.validated_data


def _route(pk: str) -> NotificationRoute:
    route = NotificationRoute.objects.filter(pk=_route_id(pk)).first()
    if route is None:
        raise NotFound("Route not found.")
    return route


class RouteViewSet(AdminViewSet):
    """Which channels hear about which breakpoints, and their timeout defaults."""

    serializer_class = RouteSerializer
    lookup_value_regex = r"[^/\x00]+"  # NUL cannot reach a PostgreSQL text column

    def get_queryset(self):
        return NotificationRoute.objects.all()

    @extend_schema(
        summary="List notification routes (admins)",
        description="By name: the order in which their defaults apply.",
        operation_id="routes_list",
        responses={200: RouteListSerializer, **error_responses(401, 403)},
    )
    def list(self, request: Request) -> Response:
        return Response(RouteListSerializer({"results": self.get_queryset()}).data)

    @extend_schema(
        summary="Add a notification route (admins)",
        description="A malformed pattern, a channel spec or a default the service refuses "
        'is 400, every problem at once with details by field ("name", "pattern", '
        '"channels[1]", "defaults.onTimeout"); a taken name among them is "name": '
        '["Already taken."]. A taken name as the only problem is 409 conflict.',
        request=RouteWriteSerializer,
        responses={201: RouteSerializer, **error_responses(400, 401, 403, 409)},
    )
    def create(self, request: Request) -> Response:
        data = _route_body(request.data)
        route = route_add(actor=actor_for_request_user(request.user), **data)
        return Response(RouteSerializer(route).data, status=status.HTTP_201_CREATED)

    @extend_schema(
        summary="Get a notification route (admins)",
        parameters=[ROUTE_ID_PARAMETER],
        responses={200: RouteSerializer, **error_responses(401, 403, 404)},
    )
    def retrieve(self, request: Request, pk: str) -> Response:
        return Response(RouteSerializer(_route(pk)).data)

    @extend_schema(
        summary="Replace a notification route (admins)",
        parameters=[ROUTE_ID_PARAMETER],
        description="The whole route: defaults and enabled left out become {} and true. "
        "Refused as adding one is: 400 with every problem, 409 for a taken name alone.",
        request=RouteWriteSerializer,
        responses={200: RouteSerializer, **error_responses(400, 401, 403, 404, 409)},
    )
    def update(self, request: Request, pk: str) -> Response:
        body = request.data  # a body that is not JSON is a 415, whatever the id
        route_id = _route_id(pk)
        data = _route_body(body, route_id)
        route = route_update(actor=actor_for_request_user(request.user), route_id=route_id, **data)
        return Response(RouteSerializer(route).data)

    @extend_schema(
        summary="Remove a notification route (admins)",
        parameters=[ROUTE_ID_PARAMETER],
        responses={
            204: OpenApiResponse(description="Removed."),
            **error_responses(400, 401, 403, 404),
        },
    )
    def destroy(self, request: Request, pk: str) -> Response:
        validated(NoBody, request)
        route_remove(actor=actor_for_request_user(request.user), route_id=_route_id(pk))
        return Response(status=status.HTTP_204_NO_CONTENT)

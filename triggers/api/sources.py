"""/api/event-sources (admins): list, add (the secret in that answer only), read, pause
and resume. No removal: the events received keep their source."""

from django.db import transaction
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response

from core.actors import actor_for_request_user
from core.exceptions import NotFound
from triggers.api.serializers import (
    EventSourceCreatedSerializer,
    EventSourceListSerializer,
    EventSourceSerializer,
)
from triggers.api.shapes import (
    NAME_SCHEMA,
    SOURCE_CREATE_SCHEMA,
    SOURCE_PATCH_SCHEMA,
    BodyRequiredSchema,
    SourceCreateSerializer,
    SourcePatchSerializer,
    documented,
)
from triggers.models import EventSource
from triggers.services import source_add, source_set_enabled
from web.api.permissions import AdminViewSet
from web.api.views import error_responses, validated

NAME_LOOKUP = r"[^/\x00]+"  # NUL cannot reach a PostgreSQL text column
SOURCE_NAME = OpenApiParameter(
    "name", NAME_SCHEMA, OpenApiParameter.PATH, description="The source's name."
)


def source_named(name: str) -> EventSource:
    source = EventSource.objects.filter(name=name).first()
    if source is None:
        raise NotFound(f"No event source named {name!r}.")
    return source


class EventSourceViewSet(AdminViewSet):
    """Senders of external events: each verified by its kind's signature and secret."""

    serializer_class = EventSourceSerializer
    schema = BodyRequiredSchema()  # list answers {"results": [...]}; bodies are required
    lookup_field = "name"
    lookup_value_regex = NAME_LOOKUP

    def get_queryset(self):
        return EventSource.objects.all()

    @extend_schema(
        summary="List event sources (admins)",
        description="By name. Secrets are never listed.",
        operation_id="event_sources_list",
        responses={200: EventSourceListSerializer, **error_responses(401, 403)},
    )
    def list(self, request: Request) -> Response:
        return Response(EventSourceListSerializer({"results": self.get_queryset()}).data)

    @extend_schema(
        summary="Add an event source (admins)",
        description="The answer holds the secret, generated unless given: it is never shown "
        "again. A malformed name or a secret of the wrong length is 400 with details by "
        "field; a taken name is 409 conflict.",
        request=documented(SOURCE_CREATE_SCHEMA),
        responses={201: EventSourceCreatedSerializer, **error_responses(400, 401, 403, 409)},
    )
    def create(self, request: Request) -> Response:
        data = validated(SourceCreateSerializer, request)
        actor = actor_for_request_user(request.user)
        with transaction.atomic():
            source = source_add(
                actor=actor, name=data["name"], kind=data["kind"], secret=data.get("secret")
            )
            if not data["enabled"]:
                source = source_set_enabled(actor=actor, name=source.name, enabled=False)
        return Response(EventSourceCreatedSerializer(source).data, status=status.HTTP_201_CREATED)

    @extend_schema(
        summary="Get an event source (admins)",
        parameters=[SOURCE_NAME],
        responses={200: EventSourceSerializer, **error_responses(401, 403, 404)},
    )
    def retrieve(self, request: Request, name: str) -> Response:
        return Response(EventSourceSerializer(source_named(name)).data)

    @extend_schema(
        summary="Pause or resume an event source (admins)",
        description='{"enabled": false} pauses it: its URL answers 404, as an unknown '
        "source's does, until it is resumed. Nothing else changes here.",
        parameters=[SOURCE_NAME],
        request=documented(SOURCE_PATCH_SCHEMA),
        responses={200: EventSourceSerializer, **error_responses(400, 401, 403, 404)},
    )
    def partial_update(self, request: Request, name: str) -> Response:
        data = validated(SourcePatchSerializer, request)  # the body first: 415 before 404
        source = source_set_enabled(
            actor=actor_for_request_user(request.user), name=name, enabled=data["enabled"]
        )
        return Response(EventSourceSerializer(source).data)

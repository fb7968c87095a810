"""External events, read by admins: GET /api/events (newest first, cursor-paginated,
filtered) and GET /api/events/{id}.

/api/events/{ref} is one path with two operations: GET reads the event whose id is
`ref` (admins, a token), POST receives an event from the source named `ref` (the
sender's signature is the credential, triggers.api.ingest). Event ids (evt_…, mixed
case) and source names (lowercase slugs) are told apart by the method, never by shape.
"""

from typing import Any

from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import generics, serializers
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from core.exceptions import NotFound
from core.limits import MAX_EVENT_TYPE_LENGTH, MAX_SOURCE_NAME_LENGTH
from triggers.api.ingest import ACCEPTED, EventIngestView
from triggers.api.serializers import ExternalEventDetailSerializer, ExternalEventSerializer
from triggers.models import EventStatus, ExternalEvent
from web.api.fields import StrictCharField
from web.api.pagination import BreakpointCursorPagination
from web.api.permissions import IsAdmin
from web.api.views import error_responses

INGESTING = "POST"


class EventCursorPagination(BreakpointCursorPagination):
    """Newest first, always (the event_received index): no `ordering` parameter."""

    ordering = ("-received_at", "-id")

    def get_ordering(self, request, queryset, view):
        return self.ordering

    def get_schema_operation_parameters(self, view):
        parameters = super().get_schema_operation_parameters(view)
        return [parameter for parameter in parameters if parameter["name"] != "ordering"]


class EventQuerySerializer(serializers.Serializer):
    source = StrictCharField(  # type: ignore[assignment]
        required=False, max_length=MAX_SOURCE_NAME_LENGTH, trim_whitespace=False
    )
    type = StrictCharField(required=False, max_length=MAX_EVENT_TYPE_LENGTH, trim_whitespace=False)
    status = serializers.ChoiceField(choices=EventStatus.choices, required=False)


FILTERS = [
    OpenApiParameter(
        "source",
        {"type": "string", "maxLength": MAX_SOURCE_NAME_LENGTH},
        description="Only events from the source with this name (empty: any).",
    ),
    OpenApiParameter(
        "type",
        {"type": "string", "maxLength": MAX_EVENT_TYPE_LENGTH},
        description="Only events of exactly this type, e.g. workflow_run (empty: any).",
    ),
    OpenApiParameter(
        "status",
        {"type": "string", "enum": list(EventStatus.values)},
        description="pending: not evaluated yet; processed: every rule evaluated; failed: "
        "evaluation itself failed, and stopped being retried.",
    ),
]


def event_filters(request: Request) -> dict[str, Any]:
    """The filters given, or a 400 naming the bad one. An empty source or type is "any";
    a status must be one (an empty one too)."""
    params = request.query_params
    given = {name: params[name] for name in ("source", "type") if params.get(name)}
    if "status" in params:
        given["status"] = params["status"]
    query = EventQuerySerializer(data=given)
    query.is_valid(raise_exception=True)
    data = query.validated_data
    filters = {"type": data["type"]} if "type" in data else {}
    if "source" in data:
        filters["source__name"] = data["source"]
    if "status" in data:
        filters["status"] = data["status"]
    return filters


class EventListView(generics.ListAPIView):
    serializer_class = ExternalEventSerializer
    permission_classes = [IsAdmin]
    pagination_class = EventCursorPagination
    filter_backends: list = []
    queryset_filters: dict[str, Any] = {}  # this request's, set by get()

    def get_queryset(self):
        # The list never loads payloads (they can be large): the detail has them.
        return ExternalEvent.objects.select_related("source").defer("payload", "headers")

    @extend_schema(
        summary="List external events (admins)",
        description="Newest first, with what each matching rule did (results) and any "
        "evaluation error; the payload is in the detail.",
        parameters=FILTERS,
        responses={200: ExternalEventSerializer(many=True), **error_responses(400, 401, 403)},
    )
    def get(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        self.queryset_filters = event_filters(request)
        return super().get(request, *args, **kwargs)

    def filter_queryset(self, queryset):
        return queryset.filter(**self.queryset_filters)


REF_FOR_READING = OpenApiParameter(
    "ref", str, OpenApiParameter.PATH, description="GET: the event's id (evt_…)."
)
REF_FOR_SENDING = OpenApiParameter(
    "ref",
    str,
    OpenApiParameter.PATH,
    description="POST: the event source's name (/api/events/github).",
)


class EventView(EventIngestView):
    """GET: an event, for admins (token or console session); POST: a sender's event."""

    ingesting = False

    def initialize_request(self, request, *args, **kwargs):
        # Before the authenticators are asked for (the schema generator's mock request too).
        self.ingesting = request.method == INGESTING
        return super().initialize_request(request, *args, **kwargs)

    def _ingesting(self) -> bool:
        return self.ingesting

    def get_authenticators(self):
        if self._ingesting():
            return super().get_authenticators()
        return [authenticator() for authenticator in APIView.authentication_classes]

    def get_permissions(self):
        return [AllowAny() if self._ingesting() else IsAdmin()]

    def get_throttles(self):
        if self._ingesting():
            return super().get_throttles()
        return [throttle() for throttle in APIView.throttle_classes]

    @extend_schema(
        summary="Get an external event (admins)",
        description="With its payload, as received.",
        parameters=[REF_FOR_READING],
        responses={200: ExternalEventDetailSerializer, **error_responses(401, 403, 404)},
    )
    def get(self, request: Request, ref: str) -> Response:
        event = ExternalEvent.objects.select_related("source").filter(pk=ref).first()
        if event is None:
            raise NotFound(f"No external event {ref!r}.")
        return Response(ExternalEventDetailSerializer(event).data)

    # EventIngestView.post's documentation, with this path's keyword (`ref`, not `source`).
    @extend_schema(
        summary="Receive an external event",
        description="Verified by the source's kind before the body is parsed "
        "(Standard Webhooks, GitHub X-Hub-Signature-256, GitLab X-Gitlab-Token, or "
        "generic-hmac X-Bpm-Signature over '<X-Bpm-Timestamp>.<body>'); stored once per "
        "delivery id; evaluated against the trigger rules by the worker. No token: the "
        "signature is the credential.",
        parameters=[REF_FOR_SENDING],
        request={"application/json": {"type": "object"}},
        responses={
            202: OpenApiResponse(ACCEPTED, description="Stored; rules evaluated shortly."),
            200: OpenApiResponse(ACCEPTED, description="A redelivery: already stored."),
            **error_responses(400, 401, 403, 404, 413, 429),
        },
    )
    def post(self, request: Request, ref: str) -> Response:
        return super().post(request, source=ref)

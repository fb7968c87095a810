"""POST /api/events/{source}: an external event in. The signature is the credential."""

from drf_spectacular.utils import (
    OpenApiParameter,
    OpenApiResponse,
    extend_schema,
    inline_serializer,
)
from rest_framework import serializers, status
from rest_framework.exceptions import UnsupportedMediaType
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from infra.ratelimits import client_address
from triggers import services
from web.api.views import error_responses

ACCEPTED = inline_serializer(
    "EventAccepted",
    {
        "eventId": serializers.CharField(),
        "duplicate": serializers.BooleanField(
            help_text="True when this delivery id was received before: nothing else happened."
        ),
    },
)


class EventIngestView(APIView):
    authentication_classes: list = []  # the signature authenticates, not a token
    permission_classes = [AllowAny]
    throttle_classes: list = []  # limited in the service: per source once verified, else per address

    @extend_schema(
        summary="Receive an external event",
        description="Verified by the source's kind before the body is parsed "
        "(Standard Webhooks, GitHub X-Hub-Signature-256, GitLab X-Gitlab-Token, or "
        "generic-hmac X-Bpm-Signature over '<X-Bpm-Timestamp>.<body>'); stored once per "
        "delivery id; evaluated against the trigger rules by the worker. 429 (with "
        "Retry-After, nothing stored) past the source's rate or past its backlog: "
        "BPM_TRIGGER_MAX_PENDING_EVENTS events waiting for evaluation.",
        parameters=[OpenApiParameter("source", str, OpenApiParameter.PATH)],
        request={"application/json": {"type": "object"}},
        responses={
            202: OpenApiResponse(ACCEPTED, description="Stored; rules evaluated shortly."),
            200: OpenApiResponse(ACCEPTED, description="A redelivery: already stored."),
            **error_responses(400, 401, 403, 404, 413, 429),
        },
    )
    def post(self, request: Request, source: str) -> Response:
        if request.content_type.split(";")[0].strip().lower() != "application/json":
            raise UnsupportedMediaType(request.content_type)
        # The raw bytes, before anything parses them: the signature covers exactly these.
        body = request._request.body
        event, created = services.event_receive(
            source_name=source, body=body, headers=request.headers, address=client_address(request)
        )
        return Response(
            {"eventId": event.pk, "duplicate": not created},
            status=status.HTTP_202_ACCEPTED if created else status.HTTP_200_OK,
        )

"""The breakpoint API: declarative reads; each state change validates input, calls one service."""

from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import status, viewsets
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from breakpoints import selectors, services
from breakpoints.api.serializers import (
    BreakpointCreateSerializer,
    BreakpointGroupsSerializer,
    BreakpointSerializer,
    CancelSerializer,
    DecisionOutcomesSerializer,
    DecisionsBatchSerializer,
    EventListSerializer,
    FeedbackCreatedSerializer,
    FeedbackCreateSerializer,
    FeedbackSerializer,
    GroupsQuerySerializer,
    ManyStatusQuerySerializer,
    ManyStatusSerializer,
    StatusOnlySerializer,
    StatusQuerySerializer,
    StatusSerializer,
)
from breakpoints.filters import BreakpointFilter
from breakpoints.payload.validation import payload_warnings
from breakpoints.representation import contract
from breakpoints.waiting.blocking import statuses_after_wait
from breakpoints.waiting.bodies import many_body, poll_rate, status_body
from breakpoints.waiting.query import parse_status_query
from core.actors import actor_for_request_user
from core.choices import Status
from core.exceptions import InvalidInput, NotFound
from core.limits import MAX_IDEMPOTENCY_KEY_LENGTH
from grants.api.serializers import GrantSerializer
from web.api.fields import NoBody
from web.api.pagination import BreakpointCursorPagination
from web.api.permissions import IsAgentOrReviewer, IsPersonDeciding, IsReviewer
from web.api.schema import NOT_BLANK
from web.api.views import error_responses, validated
from web.errors import envelope, http_status

IDEMPOTENCY_KEY = OpenApiParameter(
    "Idempotency-Key",
    # Surrounding spaces are ignored, so it needs one other character.
    {
        "type": "string",
        "minLength": 1,
        "maxLength": MAX_IDEMPOTENCY_KEY_LENGTH,
        "pattern": NOT_BLANK,
    },
    OpenApiParameter.HEADER,
    description="Makes retries safe: the same key and body within 24 h return the first "
    "breakpoint (200); the same key with another body is 409 idempotency_conflict.",
)


class BreakpointViewSet(viewsets.GenericViewSet):
    serializer_class = BreakpointSerializer
    permission_classes = [IsAgentOrReviewer]
    pagination_class = BreakpointCursorPagination
    filterset_class = BreakpointFilter
    lookup_value_regex = r"[^/\x00]+"  # NUL cannot reach a PostgreSQL text column

    def get_queryset(self):
        if self.action == "list":
            if self.request.query_params.get("search", "").strip():
                return selectors.breakpoint_page_keys(self.request.user)  # rows read by id
            return selectors.breakpoint_page_list(self.request.user)
        return selectors.breakpoint_list(self.request.user)

    @extend_schema(
        summary="List breakpoints",
        description="Reviewers see all breakpoints, agents only their own. Newest first.",
        responses={200: BreakpointSerializer(many=True), **error_responses(400, 401, 403)},
    )
    def list(self, request: Request) -> Response:
        queryset = self.filter_queryset(self.get_queryset())
        page = self.paginate_queryset(queryset)
        assert page is not None  # the cursor paginator always pages (page_size is set)
        rows = services.breakpoint_rows_page_read(request.user, page)
        return self.get_paginated_response(contract.breakpoint_rows_json(rows))

    @extend_schema(
        summary="Create a breakpoint",
        request=BreakpointCreateSerializer,
        parameters=[IDEMPOTENCY_KEY],
        responses={
            201: BreakpointSerializer,
            200: OpenApiResponse(BreakpointSerializer, description="Idempotent replay."),
            **error_responses(
                400,
                401,
                403,
                409,
                413,
                invalid="payload.escalateTo is missing or null while payload.escalateAfterSeconds "
                "is set or payload.onTimeout is escalate, or payload.autoApproveAfterN is 0.",
            ),
        },
    )
    def create(self, request: Request) -> Response:
        data = validated(BreakpointCreateSerializer, request)
        idempotency_key = request.headers.get("Idempotency-Key")
        if idempotency_key is not None and (
            not idempotency_key.strip() or len(idempotency_key) > MAX_IDEMPOTENCY_KEY_LENGTH
        ):
            raise InvalidInput(
                f"Idempotency-Key must be 1 to {MAX_IDEMPOTENCY_KEY_LENGTH} characters.",
                {"Idempotency-Key": [f"Must be 1 to {MAX_IDEMPOTENCY_KEY_LENGTH} characters."]},
            )
        bp, created = services.breakpoint_create(
            actor=actor_for_request_user(request.user),
            agent_id=data.get("agentId"),
            run_id=data.get("runId"),
            title=data.get("title"),
            payload=data["payload"],
            tags=data.get("tags"),
            ttl_seconds=data.get("ttlSeconds"),
            idempotency_key=idempotency_key.strip() if idempotency_key else None,
            requested_by=data.get("requestedBy"),
        )
        if not created or not bp.is_waiting:
            # A replay, or released at birth: read as stored. A new waiting one is shown as
            # its transaction wrote it (breakpoint_create: the row, no feedback yet).
            bp = services.breakpoint_read(request.user, bp.pk)
        # Said in this answer only (a replay's too: the same body), never stored.
        warnings = payload_warnings(data["payload"])
        return Response(
            {**BreakpointSerializer(bp).data, "warnings": warnings},
            status=status.HTTP_201_CREATED if created else status.HTTP_200_OK,
        )

    @extend_schema(
        summary="Get a breakpoint",
        responses={200: BreakpointSerializer, **error_responses(401, 403, 404)},
    )
    def retrieve(self, request: Request, pk: str) -> Response:
        return Response(BreakpointSerializer(services.breakpoint_read(request.user, pk)).data)

    @extend_schema(
        summary="Poll a breakpoint's status",
        description="The polling hot path: small and fast. With `?wait=N` (0-60 s) the "
        "answer is held while the breakpoint is waiting, until it is decided or N seconds "
        "pass; a decided one answers at once. `pollAfterMs` hints when to ask again.",
        parameters=[StatusQuerySerializer],
        responses={200: StatusSerializer, **error_responses(400, 401, 403, 404, 429, 503)},
    )
    @action(detail=True, methods=["get"], url_path="status", filterset_class=None)
    def poll_status(self, request: Request, pk: str) -> Response:
        query = parse_status_query(ids=[pk], wait=request.query_params.getlist("wait"), many=False)
        poll_rate.hit()
        row = statuses_after_wait(request.user, query).get(pk)
        if row is None:
            raise NotFound("Breakpoint not found.")
        return Response(status_body(row))

    @extend_schema(
        summary="Poll, or wait for, many breakpoints at once",
        operation_id="breakpoints_status_many",
        description="`?id=A&id=B…` (1-100 distinct ids) answers with the status of each, in "
        "the order asked; an id you may not see is reported as not found. With `?wait=N` "
        "(0-60 s) the answer is held while every one of them is waiting, and comes as "
        "soon as any of them is decided: drop the decided ones and ask again.",
        parameters=[ManyStatusQuerySerializer],
        responses={200: ManyStatusSerializer, **error_responses(400, 401, 403, 429, 503)},
    )
    @action(
        detail=False,
        methods=["get"],
        url_path="status",
        filterset_class=None,
        pagination_class=None,
    )
    def poll_statuses(self, request: Request) -> Response:
        query = parse_status_query(
            ids=request.query_params.getlist("id"),
            wait=request.query_params.getlist("wait"),
            many=True,
        )
        poll_rate.hit()
        return Response(many_body(query.ids, statuses_after_wait(request.user, query)))

    @extend_schema(
        summary="Cancel a breakpoint",
        description="Its agent or an admin. Cancelling a cancelled one again is 200; "
        "a released or expired one is 409.",
        request=CancelSerializer,
        responses={200: StatusOnlySerializer, **error_responses(400, 401, 403, 404, 409)},
    )
    @action(detail=True, methods=["post"], filterset_class=None)
    def cancel(self, request: Request, pk: str) -> Response:
        data = validated(CancelSerializer, request)
        bp = services.breakpoint_cancel(
            breakpoint_id=pk, actor=actor_for_request_user(request.user), reason=data["reason"]
        )
        return Response({"status": bp.status})

    @extend_schema(
        summary="A breakpoint's audit events",
        responses={200: EventListSerializer, **error_responses(401, 403, 404)},
    )
    @action(detail=True, methods=["get"], filterset_class=None, pagination_class=None)
    def events(self, request: Request, pk: str) -> Response:
        events = selectors.breakpoint_events(request.user, pk)
        return Response(EventListSerializer({"results": events}).data)

    @extend_schema(
        summary="Comment on, or release, a breakpoint",
        description="Reviewers and admins. `comment` may be empty only when `release` is "
        "true; `option` must be one of `payload.options` when those exist. An approval "
        "may carry a `grant`: the answer then includes it.",
        request=FeedbackCreateSerializer,
        responses={
            201: FeedbackCreatedSerializer,
            **error_responses(
                400,
                401,
                403,
                404,
                409,
                invalid="comment is blank and release is not true, option is not one of "
                "payload.options, approved disagrees with the option's verdict, or values "
                "do not answer payload.form (details keyed by JSON pointer).",
            ),
        },
    )
    # Any person reaches the service: it refuses (and records) one who is not a reviewer,
    # as it does on every channel. Agents do not give feedback.
    @action(
        detail=True, methods=["post"], permission_classes=[IsPersonDeciding], filterset_class=None
    )
    def feedback(self, request: Request, pk: str) -> Response:
        data = validated(FeedbackCreateSerializer, request)
        feedback, bp, grant = services.feedback_add_granting(  # the service records refusals
            breakpoint_id=pk,
            actor=actor_for_request_user(request.user),
            comment=data["comment"],
            release=data["release"],
            approved=data["approved"],
            option=data["option"],
            values=data["values"],
            grant=data["grant"],
        )
        body = {
            "feedback": FeedbackSerializer(feedback).data,
            "status": bp.status,
            "result": bp.result,
        }
        if grant is not None:
            body["grant"] = GrantSerializer(grant).data
        return Response(body, status=status.HTTP_201_CREATED)

    @extend_schema(
        summary="Expire a breakpoint (admins)",
        request=NoBody,
        responses={200: StatusOnlySerializer, **error_responses(400, 401, 403, 404, 409)},
    )
    @action(detail=True, methods=["post"], filterset_class=None)
    def expire(self, request: Request, pk: str) -> Response:
        validated(NoBody, request)
        bp = services.breakpoint_expire(
            breakpoint_id=pk, actor=actor_for_request_user(request.user)
        )
        return Response({"status": bp.status})

    @extend_schema(
        summary="Decide many breakpoints at once",
        operation_id="breakpoints_decisions",
        description="Reviewers and admins. 1-100 items, each decided in order as a single "
        "`feedback` with `release: true` would be (the same checks: reviewer, four eyes, "
        "seats, still waiting, option, values; the same records), each on its own: one "
        "refused item never blocks the others. The answer holds one result per item, in "
        "the items' order: `status` 201 with the breakpoint's new status, or the status and "
        "`error` a single decision would have answered (400, 403, 404, 409). A breakpoint "
        "named twice is decided once: the second is 409. A person who is not a reviewer "
        "gets 403 for the whole batch (recorded on each breakpoint named, as a single "
        "decision records it). A body that is not "
        "`{items: [...]}`, more than 100 items, an item that is not an object, lacks "
        "breakpointId or approved, or has a field of the wrong type: 400, nothing decided.",
        request=DecisionsBatchSerializer,
        responses={
            200: DecisionOutcomesSerializer,
            **error_responses(400, 401, 403, 413, 429),
        },
    )
    # As the single feedback: any person reaches the service, which refuses (403, recorded
    # on each breakpoint named) one who is not a reviewer; agents may not decide.
    @action(
        detail=False,
        methods=["post"],
        url_path="decisions",
        permission_classes=[IsPersonDeciding],
        filterset_class=None,
        pagination_class=None,
    )
    def decisions(self, request: Request) -> Response:
        data = validated(DecisionsBatchSerializer, request)
        items = [
            services.BatchItem(
                breakpoint_id=item["breakpointId"],
                approved=item["approved"],
                comment=item["comment"],
                option=item["option"],
                values=item["values"],
            )
            for item in data["items"]
        ]
        outcomes = services.decisions_batch(actor=actor_for_request_user(request.user), items=items)
        return Response({"results": [_outcome_json(outcome) for outcome in outcomes]})

    @extend_schema(
        summary="The waiting breakpoints, grouped by key and run",
        operation_id="breakpoints_groups",
        description="Reviewers and admins. Each group: the key, the run (null: none), how "
        "many wait and since when the oldest; the largest groups first, then the longest "
        "waiting, at most 100. List a group's breakpoints with "
        "`GET /api/breakpoints?status=waiting&runId=…` and decide them with "
        "`POST /api/breakpoints/decisions`.",
        parameters=[GroupsQuerySerializer],
        responses={200: BreakpointGroupsSerializer, **error_responses(400, 401, 403, 429)},
    )
    @action(
        detail=False,
        methods=["get"],
        url_path="groups",
        permission_classes=[IsReviewer],
        filterset_class=None,
        pagination_class=None,
    )
    def groups(self, request: Request) -> Response:
        statuses = request.query_params.getlist("status")
        if any(value != Status.WAITING for value in statuses):
            raise InvalidInput(
                "Only waiting breakpoints are grouped: status=waiting, or leave it out.",
                {"status": ["Must be waiting."]},
            )
        groups = selectors.breakpoint_groups(request.user)
        return Response(BreakpointGroupsSerializer({"results": groups}).data)


def _outcome_json(outcome: services.BatchOutcome) -> dict:
    """One item's result: 201 and the breakpoint, or the error a single decision answers."""
    if outcome.error is not None:
        error = outcome.error
        return {
            "breakpointId": outcome.breakpoint_id,
            "status": http_status(error),
            "error": envelope(error.code, error.message, error.details)["error"],
        }
    assert outcome.breakpoint is not None  # decided: BatchOutcome holds one or the other
    return {
        "breakpointId": outcome.breakpoint_id,
        "status": status.HTTP_201_CREATED,
        "breakpoint": {"id": outcome.breakpoint.pk, "status": outcome.breakpoint.status},
    }

"""/api/triggers (admins): list, add, read and remove trigger rules, by name; and a dry
run of one rule on a sample event, which changes nothing."""

from fnmatch import fnmatchcase

from django.db.models import QuerySet
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import status
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from core.actors import actor_for_request_user
from core.exceptions import InvalidInput, NotFound
from triggers.api.serializers import (
    DryRunResultSerializer,
    TriggerRuleListSerializer,
    TriggerRuleSerializer,
    dry_run_body,
)
from triggers.api.shapes import (
    DRY_RUN_SCHEMA,
    NAME_SCHEMA,
    TRIGGER_CREATE_SCHEMA,
    BodyRequiredSchema,
    DryRunSerializer,
    TriggerCreateSerializer,
    documented,
)
from triggers.api.sources import NAME_LOOKUP
from triggers.models import EventSource, ExternalEvent, SourceKind, TriggerRule
from triggers.services import evaluate_rule, rule_add, rule_remove
from web.api.fields import NoBody
from web.api.permissions import AdminViewSet
from web.api.views import error_responses, validated

RULE_NAME = OpenApiParameter(
    "name", NAME_SCHEMA, OpenApiParameter.PATH, description="The rule's name."
)
# Where a sample from no source in particular comes from (never saved).
SAMPLE_SOURCE = "sample"


def rules() -> QuerySet[TriggerRule]:
    return TriggerRule.objects.select_related("source", "owner")


def rule_named(name: str) -> TriggerRule:
    rule = rules().filter(name=name).first()
    if rule is None:
        raise NotFound(f"No trigger rule named {name!r}.")
    return rule


def sample_event(rule: TriggerRule, data: dict) -> ExternalEvent:
    """An unsaved event from the sample: from the source named, else the rule's."""
    source = rule.source
    if data.get("source"):
        source = EventSource.objects.filter(name=data["source"]).first()
        if source is None:
            message = f"No event source named {data['source']!r}."
            raise InvalidInput(message, {"source": [message]})
    if source is None:
        source = EventSource(name=SAMPLE_SOURCE, kind=SourceKind.GENERIC_HMAC)
    return ExternalEvent(
        source=source, type=data["type"], delivery_id="dry-run", payload=data["payload"]
    )


class TriggerRuleViewSet(AdminViewSet):
    """When an external event matches, release, cancel or create breakpoints, or forward it."""

    serializer_class = TriggerRuleSerializer
    schema = BodyRequiredSchema()  # list answers {"results": [...]}; bodies are required
    lookup_field = "name"
    lookup_value_regex = NAME_LOOKUP

    def get_queryset(self):
        return rules()

    @extend_schema(
        summary="List trigger rules (admins)",
        description="By name.",
        operation_id="triggers_list",
        responses={200: TriggerRuleListSerializer, **error_responses(401, 403)},
    )
    def list(self, request: Request) -> Response:
        return Response(TriggerRuleListSerializer({"results": self.get_queryset()}).data)

    @extend_schema(
        summary="Add a trigger rule (admins)",
        description="It acts with the permissions of the admin adding it (its owner). "
        "An unknown source, JMESPath that does not parse or params the action cannot use are "
        '400 with details by field ("name", "source", "conditions[1]", "params.selector"); '
        "a taken name is 409 conflict. "
        'Example (the CI gate): {"name": "ci-green", "source": '
        '"github", "eventType": "workflow_run", "conditions": ["workflow_run.conclusion == '
        '\'success\'"], "action": "release", "params": {"selector": {"key": '
        '"wait-for-ci", "runId": "{{ workflow_run.head_sha }}"}, "feedback": "CI passed: '
        '{{ workflow_run.html_url }}"}}.',
        request=documented(TRIGGER_CREATE_SCHEMA),
        responses={201: TriggerRuleSerializer, **error_responses(400, 401, 403, 409)},
    )
    def create(self, request: Request) -> Response:
        data = validated(TriggerCreateSerializer, request)
        rule = rule_add(
            actor=actor_for_request_user(request.user),
            name=data["name"],
            action=data["action"],
            source=data.get("source"),
            event_type=data["eventType"],
            conditions=data.get("conditions", []),
            params=data["params"],
        )
        return Response(
            TriggerRuleSerializer(rule_named(rule.name)).data, status=status.HTTP_201_CREATED
        )

    @extend_schema(
        summary="Get a trigger rule (admins)",
        parameters=[RULE_NAME],
        responses={200: TriggerRuleSerializer, **error_responses(401, 403, 404)},
    )
    def retrieve(self, request: Request, name: str) -> Response:
        return Response(TriggerRuleSerializer(rule_named(name)).data)

    @extend_schema(
        summary="Remove a trigger rule (admins)",
        parameters=[RULE_NAME],
        responses={
            204: OpenApiResponse(description="Removed."),
            **error_responses(400, 401, 403, 404),
        },
    )
    def destroy(self, request: Request, name: str) -> Response:
        validated(NoBody, request)
        rule_remove(actor=actor_for_request_user(request.user), name=name)
        return Response(status=status.HTTP_204_NO_CONTENT)

    @extend_schema(
        summary="Dry-run a trigger rule on a sample event (admins)",
        description="What the rule would do with this event, were it received now: whether "
        "it takes events of this source and type, which conditions hold, and the actions "
        "(the waiting breakpoints a release or cancel would pick, the breakpoint a create "
        "would post). Nothing is stored, released, created or sent. A condition or template "
        "that fails on the sample is the answer's `error`, not a 400.",
        parameters=[RULE_NAME],
        request=documented(DRY_RUN_SCHEMA),
        responses={200: DryRunResultSerializer, **error_responses(400, 401, 403, 404)},
    )
    @action(detail=True, methods=["post"])
    def test(self, request: Request, name: str) -> Response:
        data = validated(DryRunSerializer, request)  # the body first: 415 before 404
        rule = rule_named(name)
        event = sample_event(rule, data)
        outcome = evaluate_rule(rule, event, dry_run=True)
        matches = {
            "sourceMatches": rule.source_id is None or rule.source_id == event.source_id,
            "typeMatches": fnmatchcase(event.type, rule.event_type),
        }
        return Response(DryRunResultSerializer(dry_run_body(rule, outcome, **matches)).data)

"""The JIRA channel as the registry knows it (core.channels): its route specs, targets,
sender and webhook."""

from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.urls import path

from audit.models import EventType
from channels.jira import JIRA, issues, views
from core.channels import ChannelProvider, ChannelTarget, Spec, short_text
from core.limits import MAX_CHANNEL_FIELD_LENGTH
from notifications.base import Sent
from notifications.models import Delivery
from web.api.schema import spec_shape, text_schema


class JiraChannel(ChannelProvider):
    """An issue per breakpoint in a JIRA project, opened on creation; every feedback is
    commented on it."""

    kind = JIRA
    label = "JIRA"
    spec_keys = ("project",)
    example_specs = ({"kind": "jira", "project": "OPS"},)
    hears = frozenset({EventType.FEEDBACK})

    def configured(self) -> bool:
        return bool(settings.JIRA_URL)

    def spec_problem(self, spec: Spec) -> str | None:
        if not short_text(spec.get("project")):
            return 'A jira channel needs "project" (a project key such as OPS).'
        return None

    def spec_schemas(self) -> list[dict[str, Any]]:
        project = text_schema(MAX_CHANNEL_FIELD_LENGTH, "OPS")
        return [spec_shape("A JIRA issue per breakpoint", self.kind, "project", project)]

    def targets(
        self, spec: Spec, *, event_type: str, experts: Callable[[], list[ChannelTarget]]
    ) -> list[ChannelTarget]:
        # One issue per breakpoint: reminders and escalations do not open more.
        return [{"project": spec["project"]}] if event_type == EventType.CREATED else []

    def target_label(self, target: ChannelTarget) -> str:
        return str(target.get("project") or "")

    def send(self, delivery: Delivery) -> Sent:
        return issues.send(delivery)

    def urlpatterns(self) -> list[Any]:
        return [path("integrations/jira/webhook", views.view, name="jira-webhook")]

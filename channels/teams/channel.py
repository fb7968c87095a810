"""The Teams channel as the registry knows it (core.channels): its route specs, targets,
sender and messaging endpoint."""

from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.urls import path

from channels.teams import TEAMS, messages, views
from core.channels import ChannelProvider, ChannelTarget, Spec, short_text
from core.limits import MAX_CHANNEL_FIELD_LENGTH
from notifications.base import Sent
from notifications.models import Delivery
from web.api.schema import spec_shape, text_schema


class TeamsChannel(ChannelProvider):
    """An Adaptive Card in a Teams conversation (a team's channel or a chat) the bot is in,
    named by its conversation id."""

    kind = TEAMS
    label = "Teams"
    spec_keys = ("conversation",)
    example_specs = ({"kind": "teams", "conversation": "19:abc123@thread.tacv2"},)

    def configured(self) -> bool:
        return bool(settings.TEAMS_APP_ID and settings.TEAMS_APP_PASSWORD)

    def spec_problem(self, spec: Spec) -> str | None:
        if not short_text(spec.get("conversation")):
            return 'A teams channel needs "conversation" (an id such as 19:abc@thread.tacv2).'
        return None

    def spec_schemas(self) -> list[dict[str, Any]]:
        conversation = text_schema(
            MAX_CHANNEL_FIELD_LENGTH, "A conversation id: 19:abc123@thread.tacv2."
        )
        return [spec_shape("A Teams conversation", self.kind, "conversation", conversation)]

    def targets(
        self, spec: Spec, *, event_type: str, experts: Callable[[], list[ChannelTarget]]
    ) -> list[ChannelTarget]:
        return [{"conversation": spec["conversation"]}]

    def target_label(self, target: ChannelTarget) -> str:
        return str(target.get("conversation") or "")

    def send(self, delivery: Delivery) -> Sent:
        return messages.send(delivery)

    def urlpatterns(self) -> list[Any]:
        return [path("integrations/teams/messages", views.view, name="teams-messages")]

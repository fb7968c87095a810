"""The Web Push channel as the registry knows it (core.channels): its route specs, targets,
sender, and the service worker and device endpoints the console uses."""

from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.urls import path

from channels.push import PUSH, messages, subscriptions, views
from core.channels import EXPERTS, ChannelProvider, ChannelTarget, Spec
from notifications.base import Sent
from notifications.models import Delivery
from web.api.schema import EXPERTS_VALUE, spec_shape

# "to": "reviewers": every reviewer and admin, on each device they turned notifications on.
REVIEWERS = "reviewers"
# The unrouted spec's mark: its experts, or every reviewer when it names none that can hear.
OR_REVIEWERS = "orReviewers"


class PushChannel(ChannelProvider):
    """A notification on each device of the routed experts (or of every reviewer); with no
    matching route, the routed experts' devices, or every reviewer's when there are none."""

    kind = PUSH
    label = "push notification"
    spec_keys = ("to",)
    example_specs = ({"kind": "push", "to": EXPERTS}, {"kind": "push", "to": REVIEWERS})
    experts_phrase = "a push notification"
    unrouted_specs = ({"kind": "push", "to": EXPERTS, OR_REVIEWERS: True},)

    def configured(self) -> bool:
        return bool(settings.BPM_VAPID_PRIVATE_KEY)

    def spec_problem(self, spec: Spec) -> str | None:
        if spec.get("to") not in (EXPERTS, REVIEWERS):
            return 'A push channel needs "to": "experts" or "reviewers".'
        return None

    def spec_schemas(self) -> list[dict[str, Any]]:
        to = {**EXPERTS_VALUE, "enum": [*EXPERTS_VALUE["enum"], REVIEWERS]}
        title = "A push to each device of the routed experts, or of every reviewer"
        return [spec_shape(title, self.kind, "to", to)]

    def targets(
        self, spec: Spec, *, event_type: str, experts: Callable[[], list[ChannelTarget]]
    ) -> list[ChannelTarget]:
        if spec["to"] == REVIEWERS:
            return subscriptions.subscription_targets(None)
        users = [target["user"] for target in experts() if "user" in target]
        if not users and spec.get(OR_REVIEWERS):
            return subscriptions.subscription_targets(None)
        return subscriptions.subscription_targets(users) if users else []

    def target_label(self, target: ChannelTarget) -> str:
        return f"device {target.get('subscription', '?')} of user {target.get('user', '?')}"

    def send(self, delivery: Delivery) -> Sent:
        return messages.send(delivery)

    def urlpatterns(self) -> list[Any]:
        return [
            path("push/service-worker.js", views.service_worker, name="push-service-worker"),
            path("push/devices", views.devices, name="push-devices"),
        ]

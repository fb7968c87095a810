"""The notification channels (Slack, email, JIRA...): what each one is, and their registry.

Each channel is one object (a ChannelProvider subclass in its own folder, channels/<kind>/
channel.py) listed by dotted path in the BPM_CHANNELS setting. Routes, the fanout and the
senders ask the registry, so adding a channel touches its folder and that setting only.
The registry imports the channels lazily (django's import_string), when first asked, so
the lower layers that ask it never import the channels' packages.
"""

from collections.abc import Callable
from functools import lru_cache
from typing import Any, ClassVar

from django.conf import settings
from django.utils.module_loading import import_string
from django.utils.text import capfirst

from core import limits
from core.storable import storable_text

# "to": "experts" in a spec: the routed experts (a message to each, found by their email).
EXPERTS = "experts"

Spec = dict[str, Any]  # one entry of a route's channels: {"kind": ..., its own keys}
ChannelTarget = dict[str, Any]  # where one delivery goes on its channel (Delivery.target)


def short_text(value: Any) -> bool:
    """A spec's text: not blank, not too long, storable (PostgreSQL's jsonb cannot hold NUL)."""
    return (
        isinstance(value, str)
        and bool(value.strip())
        and len(value) <= limits.MAX_CHANNEL_FIELD_LENGTH
        and storable_text(value)
    )


def email_address(value: Any) -> bool:
    """An address a spec may name: an @, and nothing that would make it two or a header."""
    return short_text(value) and "@" in value and not any(c in value for c in "\r\n,;<>")


class ChannelProvider:
    """One notification channel, both directions: routes' specs, targets, sending, inbound.

    A subclass sets the class attributes and implements the methods that raise here.
    """

    # The spec's kind, the Delivery's `channel` and the Feedback's `via` ("slack"): at
    # most 16 characters (those fields' max_length; `manage.py check` says so).
    kind: ClassVar[str]
    label: ClassVar[str]  # how pages and messages name it ("via Slack", "via email")
    spec_keys: ClassVar[tuple[str, ...]]  # the keys its specs may have besides "kind"
    example_specs: ClassVar[tuple[Spec, ...]]  # shown in the console's help text
    # What "to": "experts" means on it, in the console's help text ("an email"); "" if
    # its specs do not take it.
    experts_phrase: ClassVar[str] = ""
    # Its specs for a breakpoint no route matches (the email to each routed expert).
    unrouted_specs: ClassVar[tuple[Spec, ...]] = ()
    # The events it hears on the targets that showed a breakpoint, besides the outcomes
    # (released, expired, cancelled): JIRA hears feedback, to comment it.
    hears: ClassVar[frozenset[str]] = frozenset()

    def configured(self) -> bool:
        """Whether it is on (its settings are there): an unconfigured channel is skipped."""
        raise NotImplementedError

    def spec_problem(self, spec: Spec) -> str | None:
        """What is wrong with one of its specs (its kind and keys are checked already)."""
        raise NotImplementedError

    def spec_schemas(self) -> list[dict[str, Any]]:
        """The JSON schemas of its spec's shapes (the OpenAPI's oneOf of a route's channels)."""
        raise NotImplementedError

    def targets(
        self, spec: Spec, *, event_type: str, experts: Callable[[], list[ChannelTarget]]
    ) -> list[ChannelTarget]:
        """Its targets for an announcing event (created, reminder, escalated) of a
        breakpoint matching a route with `spec`; `experts()`: the routed experts' targets."""
        raise NotImplementedError

    def send(self, delivery: Any) -> Any:
        """One attempt of a notifications.models.Delivery on it: a notifications.base.Sent
        (core may not import them)."""
        raise NotImplementedError

    def target_label(self, target: ChannelTarget) -> str:
        """Where a delivery's target points, for people (the routed experts' are by email)."""
        return str(target.get("email") or "")

    def urlpatterns(self) -> list[Any]:
        """Its inbound views (mounted at the site's root by channels.urls)."""
        return []


def channel_providers() -> dict[str, ChannelProvider]:
    """The channels, by kind, in the order BPM_CHANNELS lists them."""
    return _loaded(tuple(settings.BPM_CHANNELS))


@lru_cache(maxsize=4)
def _loaded(paths: tuple[str, ...]) -> dict[str, ChannelProvider]:
    providers = [import_string(path)() for path in paths]
    return {provider.kind: provider for provider in providers}


def channel_provider(kind: Any) -> ChannelProvider | None:
    """The channel of that kind, or None (not a channel, or no longer listed)."""
    return channel_providers().get(kind) if isinstance(kind, str) else None


def channel_choices() -> list[tuple[str, str]]:
    """The channels as a model field's choices: (kind, label as a form shows it: "Slack")."""
    return [(kind, capfirst(channel.label)) for kind, channel in channel_providers().items()]

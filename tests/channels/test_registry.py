"""The channel registry (core.channels): a channel is one object listed in BPM_CHANNELS.

MemoChannel below exists in this file alone: added to the setting, routes take its specs,
the API documents them, the console shows its example, the fanout gives it deliveries, the
outbox sends them through it and the console lists them under its label, and feedback given
on it is said "via Memo"; no app module names it.
"""

from collections.abc import Callable
from typing import Any

import pytest
from django.conf import settings as django_settings
from django.contrib.admin.utils import quote
from django.core.exceptions import ValidationError

from breakpoints.models import Feedback
from breakpoints.selectors import decided_via
from breakpoints.services import feedback_add
from core.actors import Actor
from core.channels import ChannelProvider, ChannelTarget, Spec, channel_providers, short_text
from core.choices import via_choices
from core.exceptions import InvalidInput
from notifications.base import Sent
from notifications.models import Delivery
from policies.routes import route_add
from tests.support.console import review_url
from tests.support.factories import AdminFactory, ReviewerFactory
from tests.support.slack import attempt

MEMO = "tests.channels.test_registry.MemoChannel"
INBOX = {"kind": "memo", "inbox": "ops"}
DELIVERIES_URL = "/admin/notifications/delivery/"
VIA_CHIP = '<span class="bpm-chip bpm-via">via Memo</span>'


class MemoChannel(ChannelProvider):
    """A memo in a named inbox, or to each routed expert; it hears feedback too."""

    kind = "memo"
    label = "Memo"
    spec_keys = ("inbox",)
    example_specs = ({"kind": "memo", "inbox": "ops"},)
    experts_phrase = "a memo"
    hears = frozenset({"feedback"})
    on = True
    sent: list[tuple[str, str, dict]] = []

    def configured(self) -> bool:
        return self.on

    def spec_problem(self, spec: Spec) -> str | None:
        if spec.get("inbox") != "experts" and not short_text(spec.get("inbox")):
            return 'A memo channel needs "inbox".'
        return None

    def spec_schemas(self) -> list[dict[str, Any]]:
        inbox = {"type": "string", "minLength": 1}
        return [{"title": "A memo", "type": "object", "properties": {"inbox": inbox}}]

    def targets(
        self, spec: Spec, *, event_type: str, experts: Callable[[], list[ChannelTarget]]
    ) -> list[ChannelTarget]:
        return experts() if spec["inbox"] == "experts" else [{"inbox": spec["inbox"]}]

    def target_label(self, target: ChannelTarget) -> str:
        return str(target.get("inbox") or target.get("email") or "")

    def send(self, delivery: Delivery) -> Sent:
        self.sent.append((delivery.event_type, delivery.breakpoint_id, delivery.target))
        return Sent(status_code=200, reply={"memo": len(self.sent)})


class LongMemoChannel(MemoChannel):
    kind = "memo-for-the-whole-team"  # 23 characters: more than Delivery.channel holds


@pytest.fixture
def memo(settings):
    """The memo channel listed after the project's own; what it sent starts empty."""
    settings.BPM_CHANNELS = [*django_settings.BPM_CHANNELS, MEMO]
    MemoChannel.sent = []
    MemoChannel.on = True
    return MemoChannel


@pytest.fixture
def admin(db):
    return Actor.for_user(AdminFactory(username="root"))


def test_the_project_lists_slack_email_jira_teams_and_push_in_that_order():
    assert list(channel_providers()) == ["slack", "email", "jira", "teams", "push"]


def test_the_projects_channels_are_named_as_before():
    assert [channel.label for channel in channel_providers().values()] == [
        "Slack",
        "email",
        "JIRA",
        "Teams",
        "push notification",
    ]


def test_feedback_keeps_the_values_it_had_and_their_names():
    assert via_choices() == [
        ("api", "Api"),
        ("console", "Console"),
        ("slack", "Slack"),
        ("email", "Email"),
        ("jira", "JIRA"),
        ("teams", "Teams"),
        ("push", "Push notification"),
        ("trigger", "Trigger"),
    ]


def test_its_kind_is_a_via_and_a_delivery_channel_while_it_is_listed(memo):
    via, channel = Feedback._meta.get_field("via"), Delivery._meta.get_field("channel")
    assert ("memo", "Memo") in via.choices and ("memo", "Memo") in channel.choices
    via.validate("memo", None)
    channel.validate("memo", None)


def test_a_kind_no_channel_has_is_no_via_nor_delivery_channel():
    for field in (Feedback._meta.get_field("via"), Delivery._meta.get_field("channel")):
        with pytest.raises(ValidationError):
            field.validate("memo", None)


def test_a_kind_longer_than_the_fields_hold_fails_the_system_check(settings):
    settings.BPM_CHANNELS = [
        *django_settings.BPM_CHANNELS,
        "tests.channels.test_registry.LongMemoChannel",
    ]
    fields = (Feedback._meta.get_field("via"), Delivery._meta.get_field("channel"))
    assert [error.id for field in fields for error in field.check()] == ["fields.E009"] * 2


def test_a_listed_channel_is_a_kind_routes_accept(memo, admin):
    route = route_add(actor=admin, name="memos", pattern="deploy.*", channels=[INBOX])
    assert route.channels == [INBOX]


def test_the_channel_judges_its_own_specs(memo, admin):
    with pytest.raises(InvalidInput) as refused:
        route_add(actor=admin, name="memos", pattern="*", channels=[{"kind": "memo"}])
    assert refused.value.details == {"channels[0]": ['A memo channel needs "inbox".']}


def test_keys_the_channel_does_not_take_are_refused_before_it_is_asked(memo, admin):
    spec = {**INBOX, "channel": "C0123"}
    with pytest.raises(InvalidInput) as refused:
        route_add(actor=admin, name="memos", pattern="*", channels=[spec])
    assert refused.value.details == {"channels[0]": ["A memo channel has no channel."]}


def test_an_unknown_kind_names_every_listed_channel(memo, admin):
    with pytest.raises(InvalidInput) as refused:
        route_add(actor=admin, name="memos", pattern="*", channels=[{"kind": "fax"}])
    assert refused.value.details == {
        "channels[0]": [
            "Each channel is an object whose kind is one of: slack, email, jira, teams, push, memo."
        ]
    }


def test_a_channel_left_out_of_the_setting_is_an_unknown_kind(admin):
    with pytest.raises(InvalidInput) as refused:
        route_add(actor=admin, name="memos", pattern="*", channels=[INBOX])
    assert "one of: slack, email, jira, teams, push." in refused.value.details["channels[0]"][0]


def test_the_api_documents_its_spec_shapes(memo, client):
    schema = client.get("/api/schema", HTTP_ACCEPT="application/vnd.oai.openapi+json").json()
    channels = schema["components"]["schemas"]["Route"]["properties"]["channels"]
    assert [shape["title"] for shape in channels["items"]["oneOf"]][-3:] == [
        "A Teams conversation",
        "A push to each device of the routed experts, or of every reviewer",
        "A memo",
    ]


def test_the_console_help_lists_the_channels_examples(admin_browser):
    page = admin_browser.get("/admin/policies/notificationroute/add/")
    assert page.context["form"].fields["channels"].help_text == (
        'A JSON list of channel specs, e.g. [{"kind": "slack", "channel": "C0123"}, '
        '{"kind": "slack", "to": "experts"}, {"kind": "email", "to": ["ops@example.com"]}, '
        '{"kind": "email", "to": "experts"}, {"kind": "jira", "project": "OPS"}, '
        '{"kind": "teams", "conversation": "19:abc123@thread.tacv2"}, '
        '{"kind": "push", "to": "experts"}, {"kind": "push", "to": "reviewers"}]. '
        '"to": "experts" means a DM (Slack) or an email or a push notification to each '
        "routed expert."
    )


def test_the_console_shows_its_example(memo, admin_browser):
    html = admin_browser.get("/admin/policies/notificationroute/add/").content.decode()
    assert "{&quot;kind&quot;: &quot;memo&quot;, &quot;inbox&quot;: &quot;ops&quot;}]" in html
    assert (
        "means a DM (Slack) or an email or a push notification or a memo to each routed expert"
        in html
    )


def test_a_matching_breakpoint_is_delivered_through_the_channel(memo, admin, make_breakpoint):
    route_add(actor=admin, name="memos", pattern="*", channels=[INBOX])
    bp = make_breakpoint()
    [delivery] = Delivery.objects.filter(breakpoint=bp)
    assert (delivery.channel, delivery.event_type, delivery.target) == ("memo", "created", {"inbox": "ops"})  # fmt: skip
    assert delivery.destination() == "memo: ops"

    sent = attempt(delivery)

    assert (sent.status, sent.reply) == ("delivered", {"memo": 1})
    assert memo.sent == [("created", bp.pk, {"inbox": "ops"})]


def test_experts_are_the_routed_experts_targets(memo, admin, make_breakpoint):
    ReviewerFactory(username="tina", email="tina@example.com")
    route_add(actor=admin, name="memos", pattern="*", channels=[{"kind": "memo", "inbox": "experts"}])  # fmt: skip
    bp = make_breakpoint(payload={"question": "Ship?", "expert": "tina"})
    [delivery] = Delivery.objects.filter(breakpoint=bp)
    assert delivery.target["email"] == "tina@example.com"


def test_it_hears_feedback_on_what_it_showed(memo, admin, make_breakpoint):
    route_add(actor=admin, name="memos", pattern="*", channels=[INBOX])
    bp = make_breakpoint()
    reviewer = Actor.for_user(ReviewerFactory(username="rita"))
    feedback_add(actor=reviewer, breakpoint_id=bp.pk, comment="Looks fine.")
    heard = Delivery.objects.filter(breakpoint=bp, event_type="feedback")
    assert list(heard.values_list("channel", "target")) == [("memo", {"inbox": "ops"})]


def test_an_unconfigured_channel_is_skipped(memo, admin, make_breakpoint):
    memo.on = False
    route_add(actor=admin, name="memos", pattern="*", channels=[INBOX])
    bp = make_breakpoint()
    assert not Delivery.objects.filter(breakpoint=bp).exists()


def test_the_console_lists_its_deliveries_under_its_label(
    memo, admin, make_breakpoint, admin_browser
):
    route_add(actor=admin, name="memos", pattern="*", channels=[INBOX])
    [delivery] = Delivery.objects.filter(breakpoint=make_breakpoint())

    listing = admin_browser.get(DELIVERIES_URL, {"channel__exact": "memo"})

    changelist = listing.context["cl"]
    assert list(changelist.result_list) == [delivery]
    assert "memo: ops" in listing.content.decode()
    [by_channel] = [spec for spec in changelist.filter_specs if spec.field_path == "channel"]
    shown = [(choice["display"], choice["selected"]) for choice in by_channel.choices(changelist)]
    assert shown == [
        ("All", False),
        ("Webhook", False),
        ("Slack", False),
        ("Email", False),
        ("JIRA", False),
        ("Teams", False),
        ("Push notification", False),
        ("Memo", True),
    ]
    detail = admin_browser.get(f"{DELIVERIES_URL}{quote(delivery.pk)}/change/").content.decode()
    assert '<div class="readonly">Memo</div>' in detail


def test_feedback_given_on_it_is_said_via_its_label(memo, make_breakpoint, reviewer_browser):
    bp = make_breakpoint()
    mona = Actor.for_user(ReviewerFactory(username="mona"))
    feedback_add(actor=mona, breakpoint_id=bp.pk, comment="Read in my memo.", via="memo")
    feedback_add(
        actor=mona, breakpoint_id=bp.pk, comment="Go.", release=True, approved=True, via="memo"
    )

    assert list(Feedback.objects.filter(breakpoint=bp).values_list("via", flat=True)) == [
        "memo",
        "memo",
    ]
    assert decided_via(bp.pk) == "Memo"
    page = reviewer_browser.get(review_url(bp.pk)).content.decode()
    assert '<span class="bpm-head__via">via Memo</span>' in page
    assert page.count(VIA_CHIP) == 2

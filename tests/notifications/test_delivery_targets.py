"""Per-target fairness: a target's cap of attempts in flight, and the hand-off on success.

Real HTTP to receivers on 127.0.0.1; the publish to the workers is recorded instead of
sent (these tests call delivery_attempt themselves, as a worker would).
"""

from datetime import timedelta

import pytest
from django.test import override_settings
from django.utils import timezone

from notifications import delivery, outbox
from notifications import services as webhooks
from notifications.delivery import claim
from notifications.models import Delivery, Webhook

pytestmark = pytest.mark.django_db
LOOPBACK = ["127.0.0.1"]


@pytest.fixture(autouse=True)
def allow_loopback(settings):
    settings.BPM_WEBHOOK_ALLOWED_HOSTS = LOOPBACK


@pytest.fixture
def handed_off(monkeypatch) -> list[str]:
    """The delivery ids handed to the workers during the test."""
    published: list[str] = []

    def record(ids: list[str]) -> int:
        published.extend(ids)
        return len(ids)

    monkeypatch.setattr(outbox, "publish_deliveries", record)
    return published


def subscribe(url: str) -> Webhook:
    with override_settings(BPM_WEBHOOK_ALLOWED_HOSTS=LOOPBACK):
        return webhooks.webhook_add(url=url, event_types=["created"])


def deliveries(webhook: Webhook) -> list[Delivery]:
    return list(Delivery.objects.filter(webhook=webhook).order_by("created_at", "pk"))


def test_a_target_with_an_attempt_in_flight_waits_while_others_are_sent(
    make_receiver, make_breakpoint
):
    slow, fast = make_receiver(), make_receiver()
    a, b = subscribe(slow.url), subscribe(fast.url)
    make_breakpoint(), make_breakpoint()
    a_first, a_second = deliveries(a)
    assert claim(a_first.pk) is not None  # in flight to A (a worker is waiting on it)

    assert webhooks.delivery_attempt(a_second.pk).status == "skipped"
    assert [webhooks.delivery_attempt(d.pk).status for d in deliveries(b)] == ["delivered"] * 2

    assert slow.received == []
    assert len(fast.received) == 2
    a_second.refresh_from_db()
    assert (a_second.status, a_second.attempts, a_second.locked_until) == ("pending", 0, None)
    assert a_second.next_attempt_at <= timezone.now()  # still due: nothing pushed back


def test_the_cap_is_configurable(make_receiver, make_breakpoint, settings):
    settings.BPM_WEBHOOK_TARGET_CONCURRENCY = 2
    receiver = make_receiver()
    webhook = subscribe(receiver.url)
    for _ in range(3):
        make_breakpoint()
    first, second, third = deliveries(webhook)

    assert claim(first.pk) is not None
    assert claim(second.pk) is not None
    assert claim(third.pk) is None


def test_a_lease_that_ran_out_frees_the_targets_slot(make_receiver, make_breakpoint):
    """A worker killed mid-attempt holds its target's slot only until its lease ends."""
    receiver = make_receiver()
    webhook = subscribe(receiver.url)
    make_breakpoint(), make_breakpoint()
    dead, waiting = deliveries(webhook)
    assert claim(dead.pk) is not None
    Delivery.objects.filter(pk=dead.pk).update(locked_until=timezone.now() - timedelta(seconds=1))

    assert webhooks.delivery_attempt(waiting.pk).status == "delivered"
    assert [r.webhook_id for r in receiver.received] == [waiting.pk]


def test_a_turn_goes_on_with_the_targets_due_deliveries_while_it_succeeds(
    make_receiver, make_breakpoint, handed_off
):
    receiver, other = make_receiver(), make_receiver()
    webhook = subscribe(receiver.url)
    subscribe(other.url)
    for _ in range(4):
        make_breakpoint()
    first, second, third, later = deliveries(webhook)
    Delivery.objects.filter(pk=later.pk).update(
        next_attempt_at=timezone.now() + timedelta(minutes=5)  # in backoff: not its turn
    )

    assert webhooks.delivery_turn(first.pk).status == "delivered"

    assert sorted(r.webhook_id for r in receiver.received) == sorted(
        [first.pk, second.pk, third.pk]
    )
    assert other.received == []  # the turn is this target's only
    assert handed_off == []


def test_when_the_turn_is_over_the_next_delivery_goes_back_to_the_queue(
    make_receiver, make_breakpoint, handed_off, monkeypatch
):
    monkeypatch.setattr(delivery, "TURN_SECONDS", 0.0)
    receiver = make_receiver()
    webhook = subscribe(receiver.url)
    for _ in range(3):
        make_breakpoint()
    first, second, third = deliveries(webhook)

    assert webhooks.delivery_turn(first.pk).status == "delivered"

    assert [r.webhook_id for r in receiver.received] == [first.pk]
    assert handed_off == [second.pk]


def test_after_a_failure_nothing_follows(make_receiver, make_breakpoint, handed_off):
    """Backoff per target: after a failed attempt the target's next deliveries wait for
    the sweep instead of following at once."""
    receiver = make_receiver(statuses=[503])
    webhook = subscribe(receiver.url)
    make_breakpoint(), make_breakpoint()
    first, second = deliveries(webhook)

    assert webhooks.delivery_turn(first.pk).status == "retry"

    assert [r.webhook_id for r in receiver.received] == [first.pk]
    assert handed_off == []
    assert webhooks.deliveries_due() == [second.pk]  # the sweep sends it

"""Several deliveries written together are published as one message (issue 39): the web
process sends it once, the worker hands each delivery on as its own deliver task."""

import pytest

from core import tasknames
from infra import publishing
from notifications import outbox
from notifications.tasks import deliver_many


@pytest.fixture
def sent(monkeypatch):
    messages: list[tuple[str, tuple]] = []

    def send_task(name, args=(), **options):
        messages.append((name, args))

    monkeypatch.setattr(publishing.current_app, "send_task", send_task)
    return messages


def test_one_delivery_is_its_own_deliver_task(sent):
    assert outbox.publish_deliveries(["d-1"]) == 1
    assert sent == [(tasknames.DELIVER, ("d-1",))]


def test_several_deliveries_are_one_message_then_one_task_each_in_the_worker(sent):
    assert outbox.publish_deliveries(["d-1", "d-2", "d-3"]) == 3
    assert sent == [(tasknames.DELIVER_MANY, (["d-1", "d-2", "d-3"],))]

    sent.clear()
    assert deliver_many.run(["d-1", "d-2", "d-3"]) == 3
    assert sent == [(tasknames.DELIVER, (f"d-{n}",)) for n in (1, 2, 3)]


def test_a_failed_message_of_several_hands_over_none(monkeypatch):
    def broker_down(name, args=(), **options):
        raise ConnectionError("refused")

    monkeypatch.setattr(publishing.current_app, "send_task", broker_down)
    assert outbox.publish_deliveries(["d-1", "d-2"]) == 0  # all left pending for the sweep

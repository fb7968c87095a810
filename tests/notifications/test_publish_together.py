"""Several deliveries written together are published as one message (issue 39): the web
process sends it once, the worker hands each delivery on as its own deliver task."""

import pytest

from core import tasknames
from infra import publishing
from infra.logging import current_request_id
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


def test_rows_of_several_requests_are_handed_on_each_in_the_context_of_its_request(
    sent_tasks,
):
    rows = [
        ["d-1", {"request_id": "req-1", "agent": "a1"}],
        ["d-2", {"request_id": "req-2"}],
        "d-3",  # from the sweep: the task's own context
    ]
    token = current_request_id.set("task-context")
    try:
        assert deliver_many.run(rows) == 3
    finally:
        current_request_id.reset(token)
    assert sent_tasks == [
        (tasknames.DELIVER, ("d-1",), "req-1"),
        (tasknames.DELIVER, ("d-2",), "req-2"),
        (tasknames.DELIVER, ("d-3",), "task-context"),
    ]
    assert current_request_id.get() == "-"  # each row's context was restored


def test_after_a_failed_hand_on_the_rest_are_left_to_the_sweep(monkeypatch):
    calls: list[tuple] = []

    def broker_gone_after_one(name, args=(), **options):
        calls.append(args)
        if len(calls) > 1:
            raise ConnectionError("refused")

    monkeypatch.setattr(publishing.current_app, "send_task", broker_gone_after_one)
    rows = [["d-1", {"request_id": "r"}], ["d-2", {"request_id": "r"}], ["d-3", {}]]
    assert deliver_many.run(rows) == 1
    assert calls == [("d-1",), ("d-2",)]  # d-3 not tried: pending, the sweep publishes it

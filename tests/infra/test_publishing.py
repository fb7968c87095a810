"""A committed transaction's publish runs on the process's publisher thread (issue 32,
defect 6): the request returns while the broker is slow or gone; the thread publishes in
the request's context; after a failed publish it leaves batches to the sweeps for a while
instead of waiting on the broker for each."""

import threading
import time

import pytest

from infra import publishing
from infra.logging import current_request_id

SAFETY_SECONDS = 30  # only a bound for waits that should end at once, never an assertion


@pytest.fixture(autouse=True)
def _in_background(settings, monkeypatch):
    settings.BPM_PUBLISH_INLINE = False
    monkeypatch.setattr(publishing, "_publisher", None)  # a thread of this test's own


def test_a_publish_after_commit_does_not_hold_the_caller_while_the_broker_hangs():
    broker_answers = threading.Event()
    handed: list[list[str]] = []

    def hanging_publish(ids: list[str]) -> int:
        broker_answers.wait(SAFETY_SECONDS)
        handed.append(ids)
        return len(ids)

    publishing.publish_soon(hanging_publish, ["d-1"])  # returns with the broker silent
    assert handed == []
    broker_answers.set()
    done = threading.Event()
    publishing.publish_soon(lambda ids: done.set() or len(ids), ["d-2"])
    assert done.wait(SAFETY_SECONDS)
    assert handed == [["d-1"]]


def test_the_thread_publishes_in_the_requests_context():
    seen: list[str] = []
    done = threading.Event()

    def publish(ids: list[str]) -> int:
        seen.append(current_request_id.get())
        done.set()
        return len(ids)

    token = current_request_id.set("req-after-commit")
    try:
        publishing.publish_soon(publish, ["d-1"])
    finally:
        current_request_id.reset(token)
    assert done.wait(SAFETY_SECONDS)
    assert seen == ["req-after-commit"]


def test_after_a_failed_publish_batches_are_left_to_the_sweeps_for_a_while():
    calls: list[list[str]] = []

    def broker_down(ids: list[str]) -> int:
        calls.append(ids)
        return 0  # nothing handed over

    publishing.publish_soon(broker_down, ["d-1"])
    publishing.publish_soon(broker_down, ["d-2"])  # within BROKER_DOWN_SECONDS: dropped
    publisher = publishing._current_publisher()
    publisher.batches.join()
    assert calls == [["d-1"]]

    publisher.broker_down_until = 0.0  # the while has passed
    publishing.publish_soon(broker_down, ["d-3"])
    publisher.batches.join()
    assert calls == [["d-1"], ["d-3"]]


def test_a_publisher_that_raises_leaves_the_thread_running():
    def broken(ids: list[str]) -> int:
        raise RuntimeError("bug")

    done = threading.Event()
    publishing.publish_soon(broken, ["d-1"])
    publishing.publish_soon(lambda ids: done.set() or len(ids), ["d-2"])
    assert done.wait(SAFETY_SECONDS)


def _held_thread() -> threading.Event:
    """Keep the publisher thread busy until the event is set, so batches queue up."""
    release = threading.Event()
    started = threading.Event()

    def busy(ids: list[str]) -> int:
        started.set()
        release.wait(SAFETY_SECONDS)
        return len(ids)

    publishing.publish_soon(busy, ["busy"])
    assert started.wait(SAFETY_SECONDS)
    return release


def _as_request(request_id: str, publish) -> None:
    token = current_request_id.set(request_id)
    try:
        publish()
    finally:
        current_request_id.reset(token)


def test_rows_of_several_requests_waiting_together_go_in_one_message_each_with_its_context(
    sent_tasks,
):
    def by_id(ids: list[str]) -> int:
        return publishing.publish("task.each", ids)

    release = _held_thread()
    _as_request("req-1", lambda: publishing.publish_soon(by_id, ["d-1"], together="task.many"))
    _as_request(
        "req-2", lambda: publishing.publish_soon(by_id, ["d-2", "d-3"], together="task.many")
    )
    _as_request("req-3", lambda: publishing.publish_soon(by_id, ["d-4"], together="task.many"))
    release.set()
    publishing._current_publisher().batches.join()

    assert len(sent_tasks) == 1
    name, (rows,), _ = sent_tasks[0]
    assert name == "task.many"
    assert [(row_id, fields["request_id"]) for row_id, fields in rows] == [
        ("d-1", "req-1"),
        ("d-2", "req-2"),
        ("d-3", "req-2"),
        ("d-4", "req-3"),
    ]


def test_one_row_waiting_alone_goes_through_its_own_publisher_in_its_context(sent_tasks):
    def by_id(ids: list[str]) -> int:
        return publishing.publish("task.each", ids)

    release = _held_thread()
    _as_request("req-1", lambda: publishing.publish_soon(by_id, ["d-1"], together="task.many"))
    release.set()
    publishing._current_publisher().batches.join()

    assert sent_tasks == [("task.each", ("d-1",), "req-1")]


def test_batches_without_a_together_task_are_published_one_by_one(sent_tasks):
    def by_id(ids: list[str]) -> int:
        return publishing.publish("task.each", ids)

    release = _held_thread()
    _as_request("req-1", lambda: publishing.publish_soon(by_id, ["d-1"]))
    _as_request("req-2", lambda: publishing.publish_soon(by_id, ["d-2"]))
    release.set()
    publishing._current_publisher().batches.join()

    assert sent_tasks == [("task.each", ("d-1",), "req-1"), ("task.each", ("d-2",), "req-2")]


def test_rows_together_beyond_the_bound_are_split_into_several_messages(sent_tasks, monkeypatch):
    monkeypatch.setattr(publishing, "MAX_ROWS_TOGETHER", 2)
    release = _held_thread()
    for n in range(5):
        publishing.publish_soon(lambda ids: 0, [f"d-{n}"], together="task.many")
    release.set()
    publishing._current_publisher().batches.join()

    assert [[row_id for row_id, _ in args[0]] for _, args, _ in sent_tasks] == [
        ["d-0", "d-1"],
        ["d-2", "d-3"],
        ["d-4"],
    ]


def test_under_load_a_row_waits_for_others_to_go_in_its_message(sent_tasks, monkeypatch):
    monkeypatch.setattr(publishing, "TOGETHER_WAIT_SECONDS", SAFETY_SECONDS)
    publisher = publishing._current_publisher()
    publisher.last_sent = time.monotonic()  # a message just went out: under load
    publishing.publish_soon(lambda ids: 0, ["d-1"], together="task.many")
    time.sleep(0.1)  # the thread has taken d-1 and waits for company
    publishing.publish_soon(lambda ids: 0, ["d-2"], together="task.many")
    for n in range(3, publishing.MAX_BATCHES_TOGETHER + 1):  # its bound ends the wait
        publishing.publish_soon(lambda ids: 0, [f"d-{n}"], together="task.many")
    publisher.batches.join()

    assert len(sent_tasks) == 1
    rows = [row_id for row_id, _ in sent_tasks[0][1][0]]
    assert rows[:2] == ["d-1", "d-2"] and len(rows) == publishing.MAX_BATCHES_TOGETHER


def test_when_idle_a_row_goes_at_once_without_waiting_for_others(sent_tasks, monkeypatch):
    monkeypatch.setattr(publishing, "TOGETHER_WAIT_SECONDS", SAFETY_SECONDS)
    publisher = publishing._current_publisher()  # nothing sent yet: idle
    sent = threading.Event()
    publishing.publish_soon(
        lambda ids: publishing.publish("task.each", ids), ["d-1"], together="task.many"
    )
    # Had it waited for company, it would wait SAFETY_SECONDS: it is sent before.
    threading.Thread(target=lambda: (publisher.batches.join(), sent.set()), daemon=True).start()
    assert sent.wait(SAFETY_SECONDS / 2)
    assert [(name, args) for name, args, _ in sent_tasks] == [("task.each", ("d-1",))]

"""A committed transaction's publish runs on the process's publisher thread (issue 32,
defect 6): the request returns while the broker is slow or gone; the thread publishes in
the request's context; after a failed publish it leaves batches to the sweeps for a while
instead of waiting on the broker for each."""

import threading

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

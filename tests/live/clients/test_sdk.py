"""The SDK's blocking `Client` against the live system, as an agent and as a reviewer.

The clients are strict (tests/clients/conftest.py): every answer must decode exactly with
the SDK's models. A reviewer decides from a thread while the agent's call waits.
"""

import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from bpm_client import (
    Breakpoint,
    Client,
    IdempotencyConflict,
    InvalidState,
    NotAuthenticated,
    NotFound,
    WaitTimeout,
)

from accounts.tokens import token_create_for_agent
from tests.live.clients.conftest import with_default_sigint

SAFETY_SECONDS = 60  # only a bound for the helpers' loops, never an assertion


class Background:
    """Run `work` in a thread; join() re-raises what it raised there."""

    def __init__(self, work: Callable[[], Any]):
        self.error: BaseException | None = None
        self.value: Any = None
        self._thread = threading.Thread(target=self._run, args=(work,), daemon=True)
        self._thread.start()

    def _run(self, work: Callable[[], Any]) -> None:
        try:
            self.value = work()
        except BaseException as error:  # noqa: BLE001 - handed to join()
            self.error = error

    def join(self) -> Any:
        self._thread.join(SAFETY_SECONDS)
        assert not self._thread.is_alive(), "the background work did not finish"
        if self.error is not None:
            raise self.error
        return self.value


def find_waiting(client: Client, **filters: Any) -> Breakpoint:
    """The one waiting breakpoint matching `filters`, once it exists."""
    deadline = time.monotonic() + SAFETY_SECONDS
    while time.monotonic() < deadline:
        found = list(client.list(status="waiting", **filters))
        if found:
            assert len(found) == 1, [bp.breakpoint_id for bp in found]
            return found[0]
        time.sleep(0.1)
    raise AssertionError(f"no waiting breakpoint matching {filters}")


class WaitSignal(httpx.HTTPTransport):
    """The real transport; `waiting` is set once a long-poll (`?wait=`) is sent."""

    def __init__(self) -> None:
        super().__init__()
        self.waiting = threading.Event()
        self.long_polls = 0

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        if "wait" in request.url.params:
            self.long_polls += 1
            self.waiting.set()
        return super().handle_request(request)


# --- breakpoint(): the one-call way ------------------------------------------------------


def test_breakpoint_returns_the_reviewers_approval(agent, reviewer):
    decider = Background(
        lambda: reviewer.release(find_waiting(reviewer, tags=["deploy"]).breakpoint_id, "go")
    )
    result = agent.breakpoint("Ship?", tags=["deploy"], timeout=SAFETY_SECONDS)
    decider.join()
    assert result.approved is True and result.status == "released"
    assert (result.responded_by, result.feedback, result.response) == ("alice", "go", "go")
    assert agent.status(result.breakpoint_id).status == "released"


def test_breakpoint_returns_a_rejection_with_its_feedback(agent, reviewer):
    decider = Background(
        lambda: reviewer.release(
            find_waiting(reviewer).breakpoint_id, "too risky today", approved=False
        )
    )
    result = agent.breakpoint("Drop the table?", timeout=SAFETY_SECONDS)
    decider.join()
    assert result.approved is False and result.status == "released"
    assert result.feedback == "too risky today" and result.responded_by == "alice"


def test_breakpoint_returns_the_chosen_option(agent, reviewer):
    def choose() -> None:
        bp = find_waiting(reviewer)
        assert bp.payload["options"] == ["approve", "hold"]
        reviewer.release(bp.breakpoint_id, "wait for Monday", option="hold")

    decider = Background(choose)
    result = agent.breakpoint("Release?", options=["approve", "hold"], timeout=SAFETY_SECONDS)
    decider.join()
    assert result.option == "hold" and result.status == "released"
    assert result.feedback == "wait for Monday"


def test_breakpoint_expires_after_its_ttl(agent):
    result = agent.breakpoint("Anyone there?", ttl=2, timeout=SAFETY_SECONDS)
    assert result.status == "expired" and result.approved is False
    assert result.feedback  # says why
    bp = agent.get(result.breakpoint_id)
    assert bp.expired_at is not None and bp.ttl_seconds == 2


def test_breakpoint_ends_cancelled_when_another_client_cancels(live, agent, agent_token):
    def cancel() -> str:
        with Client(live.base_url, agent_token, strict=True) as other:
            return other.cancel(find_waiting(other).breakpoint_id, reason="superseded")

    canceller = Background(cancel)
    result = agent.breakpoint("Migrate?", timeout=SAFETY_SECONDS)
    assert canceller.join() == "cancelled"
    assert result.status == "cancelled" and result.approved is False


@pytest.mark.own_system
def test_wait_reconnects_through_a_server_restart(live, agent_token, reviewer):
    """The web server goes away for 3 s mid-wait; the wait still gets the decision."""
    transport = WaitSignal()
    with Client(live.base_url, agent_token, strict=True, transport=transport) as agent:
        bp = agent.create("Deploy during the restart?")

        def restart_then_release() -> None:
            assert transport.waiting.wait(SAFETY_SECONDS)
            live.restart_web(down_seconds=3)
            reviewer.release(bp.breakpoint_id, "after the restart")

        decider = Background(restart_then_release)
        status = agent.wait(bp.breakpoint_id, timeout=SAFETY_SECONDS * 2)
        decider.join()
    assert status.status == "released"
    assert status.result is not None and status.result.feedback == "after the restart"
    assert transport.long_polls >= 2  # the first long-poll was cut: it asked again


# --- errors ------------------------------------------------------------------------------


def test_bad_token_raises_not_authenticated_and_creates_nothing(live, reviewer):
    with Client(live.base_url, "bpm_" + "x" * 43, strict=True) as stranger:
        with pytest.raises(NotAuthenticated) as raised:
            stranger.create("Ship?")
    error = raised.value
    assert error.code == "not_authenticated" and error.status_code == 401
    assert error.message and error.request_id
    assert list(reviewer.list()) == []


def test_another_agents_breakpoint_is_not_found(live, agent):
    with Client(live.base_url, token_create_for_agent(agent_id="agent-b")[1]) as other:
        theirs = other.create("Theirs?")
        for call in (agent.get, agent.status, agent.cancel):
            with pytest.raises(NotFound) as raised:
                call(theirs.breakpoint_id)
            assert raised.value.code == "not_found" and raised.value.status_code == 404
        assert other.status(theirs.breakpoint_id).status == "waiting"


def test_releasing_twice_is_invalid_state(agent, reviewer):
    bp = agent.create("Ship?")
    reviewer.release(bp.breakpoint_id, "first")
    with pytest.raises(InvalidState) as raised:
        reviewer.release(bp.breakpoint_id, "second")
    assert raised.value.status_code == 409 and raised.value.code == "invalid_state"
    assert raised.value.details["currentStatus"] == "released"


def test_idempotency_key_replays_the_first_create_and_refuses_another_body(agent, reviewer):
    first = agent.create("Ship?", idempotency_key="deploy-42")
    again = agent.create("Ship?", idempotency_key="deploy-42")
    assert again.breakpoint_id == first.breakpoint_id
    with pytest.raises(IdempotencyConflict) as raised:
        agent.create("Something else?", idempotency_key="deploy-42")
    assert raised.value.status_code == 409
    assert [bp.breakpoint_id for bp in reviewer.list()] == [first.breakpoint_id]


# --- the lower-level calls ---------------------------------------------------------------


def test_files_given_by_path_are_sent_with_their_content(agent, tmp_path, monkeypatch):
    work = tmp_path / "work"
    (work / "docs").mkdir(parents=True)
    (work / "plan.md").write_text("# Plan\n\n1. Deploy\n")
    (work / "docs" / "notes.txt").write_text("notes")
    outside = tmp_path / "elsewhere.py"
    outside.write_text("print('hi')\n")
    monkeypatch.chdir(work)

    given = {"path": "inline.md", "format": "markdown", "content": "inline"}
    bp = agent.create("Review?", files=["plan.md", Path("docs/notes.txt"), outside, given])
    files = agent.get(bp.breakpoint_id).payload["context"]["files"]
    assert files[0] == {"path": "plan.md", "content": "# Plan\n\n1. Deploy\n"}
    assert files[1] == {"path": "docs/notes.txt", "content": "notes"}
    assert files[2] == {"path": "elsewhere.py", "content": "print('hi')\n"}  # its bare name
    assert files[3] == given


def test_list_walks_every_page_with_filters(agent, reviewer):
    made = [
        agent.create(f"Step {n}?", tags=["batch", *(["db"] if n < 3 else [])]) for n in range(5)
    ]
    ids = [bp.breakpoint_id for bp in made]
    reviewer.release(ids[0], "done")

    assert [bp.breakpoint_id for bp in reviewer.list(page_size=2)] == ids[::-1]
    waiting = reviewer.list(status="waiting", page_size=2)
    assert [bp.breakpoint_id for bp in waiting] == ids[:0:-1]
    tagged = reviewer.list(tags=["batch", "db"], page_size=2, ordering="createdAt")
    assert [bp.breakpoint_id for bp in tagged] == ids[:3]
    assert [bp.breakpoint_id for bp in agent.list(status="released")] == ids[:1]


def test_events_tell_the_history(agent, reviewer):
    bp = agent.create("Ship?")
    reviewer.feedback(bp.breakpoint_id, "what about the backup?")
    reviewer.release(bp.breakpoint_id, "go")
    events = agent.events(bp.breakpoint_id)
    assert [(e.type, e.actor) for e in events] == [
        ("created", "agent:agent-a"),
        ("feedback", "alice"),
        ("feedback", "alice"),
        ("released", "alice"),
    ]
    assert events[0].timestamp <= events[-1].timestamp


def test_wait_any_returns_once_one_is_decided(live, agent_token, reviewer):
    transport = WaitSignal()
    with Client(live.base_url, agent_token, strict=True, transport=transport) as agent:
        first, second = agent.create("First?"), agent.create("Second?")

        def release_second() -> None:
            assert transport.waiting.wait(SAFETY_SECONDS)
            reviewer.release(second.breakpoint_id, "go")

        decider = Background(release_second)
        entries = agent.wait_any(
            [first.breakpoint_id, second.breakpoint_id], timeout=SAFETY_SECONDS
        )
        decider.join()
    assert [e.breakpoint_id for e in entries] == [first.breakpoint_id, second.breakpoint_id]
    assert not entries[0].done and entries[0].status == "waiting"
    assert entries[1].done and entries[1].status == "released"
    assert entries[1].result is not None and entries[1].result.approved is True


def test_wait_with_a_timeout_raises_wait_timeout(agent):
    bp = agent.create("Slow one?")
    with pytest.raises(WaitTimeout) as raised:
        agent.wait(bp.breakpoint_id, timeout=1)
    assert raised.value.breakpoint_id == bp.breakpoint_id and raised.value.timeout == 1
    assert agent.status(bp.breakpoint_id).status == "waiting"  # a timeout changes nothing


# --- Ctrl-C while waiting ----------------------------------------------------------------

ASKER = """
import faulthandler
import sys
import httpx

faulthandler.enable()  # SIGABRT (a test giving up on it) prints where it is
from bpm_client import Client

class Announce(httpx.HTTPTransport):
    def handle_request(self, request):
        if "wait" in request.url.params:
            print("waiting", request.url.path.split("/")[3], flush=True)
        return super().handle_request(request)

client = Client(transport=Announce())
try:
    client.breakpoint(sys.argv[1], cancel_on_interrupt=sys.argv[2] == "cancel")
except KeyboardInterrupt:
    print("interrupted", flush=True)
    sys.exit(130)
"""


@pytest.mark.parametrize(("mode", "status"), [("cancel", "cancelled"), ("keep", "waiting")])
def test_ctrl_c_cancels_only_with_cancel_on_interrupt(agent, bpm_env, tmp_path, mode, status):
    script = tmp_path / "ask.py"
    script.write_text(ASKER)
    asker = subprocess.Popen(
        with_default_sigint([sys.executable, str(script), f"Interrupt me ({mode})?", mode]),
        env=bpm_env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    watchdog = threading.Timer(SAFETY_SECONDS, asker.kill)  # never hang the suite
    watchdog.start()
    try:
        line = asker.stdout.readline().split()
        watchdog.cancel()
        assert line[:1] == ["waiting"], asker.stderr.read()
        asker.send_signal(signal.SIGINT)
        try:
            out, err = asker.communicate(timeout=SAFETY_SECONDS)
        except subprocess.TimeoutExpired:
            asker.send_signal(signal.SIGABRT)  # its stack, for the failure's message
            out, err = asker.communicate(timeout=SAFETY_SECONDS)
    finally:
        watchdog.cancel()
        asker.kill()
        asker.wait()
    assert asker.returncode == 130 and "interrupted" in out, err
    assert agent.status(line[1]).status == status


HELD = """
import os
import signal
import sys
import threading

import httpx
from bpm_client import Client

in_flight, interrupted = threading.Event(), threading.Event()
seen = []


class Held(httpx.HTTPTransport):
    # A long-poll that stays in the transport until its caller was interrupted.
    def handle_request(self, request):
        if "wait" in request.url.params:
            in_flight.set()
            try:
                interrupted.wait(30)
            except BaseException as error:
                seen.append(type(error).__name__)
                raise
        return super().handle_request(request)


client = Client(transport=Held())
created = client.create(sys.argv[1])


def ctrl_c():
    in_flight.wait(30)
    os.kill(os.getpid(), signal.SIGINT)


threading.Thread(target=ctrl_c, daemon=True).start()
try:
    client.wait(created.breakpoint_id, timeout=60)
    print("not interrupted")
except KeyboardInterrupt:
    print("interrupted")
interrupted.set()
print("the transport saw:", seen)
"""


def test_ctrl_c_during_a_request_lands_in_the_caller_never_inside_httpx(bpm_env, tmp_path):
    """A KeyboardInterrupt raised inside httpx's connection pool can leave the pool's lock
    held, and the request's clean-up then waits for it for ever (bpm_client.interrupts):
    the request in flight never sees the interrupt, its caller does."""
    script = tmp_path / "held.py"
    script.write_text(HELD)
    done = subprocess.run(
        with_default_sigint([sys.executable, str(script), "Held?"]),
        env=bpm_env,
        capture_output=True,
        text=True,
        timeout=SAFETY_SECONDS,
    )
    assert done.stdout.splitlines() == ["interrupted", "the transport saw: []"], done.stderr

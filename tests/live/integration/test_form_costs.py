"""Fault: costly forms sent to the real web server do not freeze it (issue 47, items 2, 3).

Real processes (gunicorn with the production worker class, PostgreSQL, Redis). Before the
fix, a form pattern of six `a{0,99}` against 100 `a` and a `b` held a web worker for ~28 s
(Python's `re` backtracks and holds the interpreter), and a `$defs` node applying itself
four times at each level would have taken about a day on a 16-deep proposal; with two of
them in flight an unrelated agent's list took 26.6 s. Now the pattern is RE2's and the
form is refused when declared.

No timed assertion: both hostile creates are sent at once, an unrelated agent's list is
sent while they are in flight, and every answer is checked (the list 200, each hostile
create a 400 naming where). The clients' timeouts only end a hung test.
"""

import threading
from typing import Any

import httpx
import pytest

from accounts.tokens import token_create_for_agent
from breakpoints.models import Breakpoint
from tests.support.system import System

pytestmark = pytest.mark.django_db(transaction=True)

SLOW_IN_PYTHON = "^a{0,99}a{0,99}a{0,99}a{0,99}a{0,99}a{0,99}$"


@pytest.fixture
def system_options() -> dict[str, Any]:
    return {"beat": False}


def hostile_pattern_body() -> dict:
    form = {"type": "object", "properties": {"x": {"type": "string", "pattern": SLOW_IN_PYTHON}}}
    proposal = {"x": "a" * 100 + "b"}
    return {"payload": {"question": "Pattern?", "form": form, "proposal": proposal}}


def hostile_ref_graph_body() -> dict:
    node = {
        "type": "object",
        "properties": {"c": {"allOf": [{"$ref": "#/$defs/n"}] * 4}, "s": {"type": "string"}},
    }
    form = {"type": "object", "$defs": {"n": node}, "$ref": "#/$defs/n"}
    proposal: dict = {"s": "x" * 10}
    for _ in range(15):
        proposal = {"c": proposal, "s": "x" * 10}
    return {"payload": {"question": "Refs?", "form": form, "proposal": proposal}}


def client_for(system: System, agent_id: str) -> httpx.Client:
    raw = token_create_for_agent(agent_id=agent_id)[1]
    return httpx.Client(
        base_url=system.base_url, headers={"Authorization": f"Bearer {raw}"}, timeout=20
    )


def test_hostile_forms_in_flight_do_not_freeze_the_web_workers(system):
    hostile = client_for(system, "agent-hostile")
    unrelated = client_for(system, "agent-unrelated")
    answers: dict[str, httpx.Response | BaseException] = {}
    started = threading.Barrier(3)

    def send(name: str, body: dict) -> None:
        started.wait(timeout=20)
        try:
            answers[name] = hostile.post("/api/breakpoints", json=body)
        except BaseException as exc:  # the assertion below names it
            answers[name] = exc

    senders = [
        threading.Thread(target=send, args=("pattern", hostile_pattern_body())),
        threading.Thread(target=send, args=("refs", hostile_ref_graph_body())),
    ]
    with hostile, unrelated:
        for sender in senders:
            sender.start()
        started.wait(timeout=20)
        listed = unrelated.get("/api/breakpoints")
        for sender in senders:
            sender.join(timeout=60)

    assert listed.status_code == 200, listed.text
    pattern, refs = answers["pattern"], answers["refs"]
    assert isinstance(pattern, httpx.Response) and pattern.status_code == 400, pattern
    assert pattern.json()["error"]["details"]["payload.proposal/x"] == [
        f"Does not match the pattern {SLOW_IN_PYTHON!r}."
    ]
    assert isinstance(refs, httpx.Response) and refs.status_code == 400, refs
    (problem,) = refs.json()["error"]["details"]["payload.form"]
    assert problem.startswith("/$defs/n")
    assert not Breakpoint.objects.filter(agent_id="agent-hostile").exists()

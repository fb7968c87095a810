"""bpm_client.langgraph against the live system: a LangGraph graph (the real package, plain
nodes: tests/support/langgraph_deploy.py) whose node asks through a breakpoint, decided by
a reviewer through the API; and a graph whose process is killed while it waits, resumed by
a new process from the same SQLite checkpointer."""

import json
import re
import signal
import subprocess
import sys
import uuid
from pathlib import Path
from typing import TypedDict

from bpm_client import AsyncClient, Client
from bpm_client.langgraph import ainvoke, ask, invoke
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph

from tests.support.aio import run_async
from tests.support.langgraph_deploy import FORM, START_STATE, graph
from tests.support.reviewing import SAFETY_SECONDS, Reviewer, approve, reject, waiting_breakpoints
from tests.support.system import PROJECT_DIR


def new_thread() -> dict:
    return {"configurable": {"thread_id": f"deploy-{uuid.uuid4().hex[:12]}"}}


def test_an_approval_resumes_the_graph_with_the_proposal(agent: Client, reviewer: Client):
    config = new_thread()
    thread = config["configurable"]["thread_id"]
    decider = Reviewer(reviewer, approve("go"), run_id=thread)
    final = invoke(
        graph(InMemorySaver()), START_STATE, config, client=agent, timeout=SAFETY_SECONDS
    )
    (seen,) = decider.join()
    assert final == {"service": "web", "replicas": 3, "outcome": "deployed"}
    assert (seen.key, seen.question, seen.run_id) == ("langgraph.deploy", "Scale web?", thread)
    assert seen.payload["form"] == FORM and seen.payload["proposal"] == {"replicas": 3}


def test_an_edited_approval_gives_the_node_the_reviewers_values(agent: Client, reviewer: Client):
    config = new_thread()
    decider = Reviewer(
        reviewer, approve("5 is safer", {"replicas": 5}), run_id=config["configurable"]["thread_id"]
    )
    final = invoke(
        graph(InMemorySaver()), START_STATE, config, client=agent, timeout=SAFETY_SECONDS
    )
    decider.join()
    assert final == {"service": "web", "replicas": 5, "outcome": "deployed"}


def test_a_rejection_gives_the_node_the_feedback(agent: Client, reviewer: Client):
    config = new_thread()
    decider = Reviewer(
        reviewer, reject("not on a Friday"), run_id=config["configurable"]["thread_id"]
    )
    final = invoke(
        graph(InMemorySaver()), START_STATE, config, client=agent, timeout=SAFETY_SECONDS
    )
    decider.join()
    assert final == {"service": "web", "replicas": 3, "outcome": "stopped: not on a Friday"}


def test_ainvoke_resumes_the_graph_with_the_decision(live, agent_token, reviewer: Client):
    config = new_thread()
    decider = Reviewer(
        reviewer, approve("ok", {"replicas": 2}), run_id=config["configurable"]["thread_id"]
    )

    async def scenario():
        async with AsyncClient(live.base_url, agent_token, strict=True) as client:
            return await ainvoke(
                graph(InMemorySaver()), START_STATE, config, client=client, timeout=SAFETY_SECONDS
            )

    final = run_async(scenario())
    decider.join()
    assert final == {"service": "web", "replicas": 2, "outcome": "deployed"}


def test_a_graph_killed_while_waiting_resumes_in_a_new_process_without_asking_again(
    tmp_path: Path, bpm_env: dict[str, str], reviewer: Client
):
    """First process: runs the graph until it waits for the decision, and is killed. A
    reviewer approves with an edit. Second process, same SQLite checkpointer and thread:
    finds the same breakpoint (decided), resumes and finishes with the approved values."""
    checkpoints, thread = str(tmp_path / "checkpoints.sqlite"), "deploy-restart-1"
    command = [sys.executable, "-m", "tests.support.langgraph_deploy", checkpoints, thread]
    first = subprocess.Popen(
        command, cwd=PROJECT_DIR, env=bpm_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    try:
        (waiting,) = waiting_breakpoints(reviewer, run_id=thread)
        assert first.poll() is None, first.communicate()
    finally:
        first.send_signal(signal.SIGKILL)
        first.communicate(timeout=SAFETY_SECONDS)
    reviewer.release(waiting.breakpoint_id, "4 will do", values={"replicas": 4})

    second = subprocess.run(
        command, cwd=PROJECT_DIR, env=bpm_env, capture_output=True, text=True,
        timeout=SAFETY_SECONDS,
    )  # fmt: skip
    assert second.returncode == 0, second.stderr
    assert json.loads(second.stdout) == {"service": "web", "replicas": 4, "outcome": "deployed"}
    assert [bp.breakpoint_id for bp in reviewer.list(run_id=thread)] == [waiting.breakpoint_id]


def test_the_guides_example_runs_as_written(
    tmp_path: Path, bpm_env: dict[str, str], reviewer: Client
):
    """docs/langgraph.md's deploy.py, copied from the page: asks, and prints the graph's
    end with the reviewer's edit."""
    page = (PROJECT_DIR / "docs" / "langgraph.md").read_text()
    (example,) = (
        body for body in re.findall(r"```python\n(.*?)```", page, re.S) if "invoke(" in body
    )
    (tmp_path / "deploy.py").write_text(example)
    decider = Reviewer(reviewer, approve("5 is safer", {"replicas": 5}), run_id="deploy-42")
    done = subprocess.run(
        [sys.executable, "deploy.py", "deploy-42"], cwd=tmp_path, env=bpm_env,
        capture_output=True, text=True, timeout=2 * SAFETY_SECONDS,
    )  # fmt: skip
    (seen,) = decider.join()
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"service": "web", "replicas": 5, "outcome": "deployed"}
    assert seen.tags == ["deploy"] and (tmp_path / "checkpoints.sqlite").exists()


class TwoChecks(TypedDict, total=False):
    security: str
    billing: str


def check(team: str):
    def node(state: TwoChecks) -> dict[str, str]:
        result = ask(f"Sign off for {team}?", tags=["sign-off"])
        return {team: "yes" if result.approved else f"no: {result.feedback}"}

    return node


def test_asks_of_parallel_branches_wait_together(agent: Client, reviewer: Client):
    """Two branches stop at once: both breakpoints are open before either is decided (the
    reviewer waits to see both), and the graph resumes once both are."""
    builder = StateGraph(TwoChecks)
    for team in ("security", "billing"):
        builder.add_node(team, check(team))
        builder.add_edge(START, team)
        builder.add_edge(team, END)
    config = new_thread()

    def decide(client: Client, waiting: list) -> None:
        by_question = {bp.question: bp.breakpoint_id for bp in waiting}
        client.release(by_question["Sign off for security?"], "fine")
        client.release(by_question["Sign off for billing?"], "over budget", approved=False)

    decider = Reviewer(reviewer, decide, count=2, run_id=config["configurable"]["thread_id"])
    final = invoke(
        builder.compile(checkpointer=InMemorySaver()),
        {},
        config,
        client=agent,
        timeout=SAFETY_SECONDS,
    )
    keys = sorted(bp.key for bp in decider.join())
    assert final == {"security": "yes", "billing": "no: over budget"}
    assert keys == ["langgraph.billing", "langgraph.security"]

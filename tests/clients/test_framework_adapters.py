"""The agent-framework adapters (bpm_client.langgraph, bpm_client.openai_agents) without a
server: the keys they derive from the frameworks' ids, the extras they need, and the
mistakes they refuse with a clear message. Their live tests are in tests/live/clients/."""

import subprocess
import sys
import textwrap

import pytest
from agents import Agent, function_tool
from bpm_client import BreakpointResult
from bpm_client.frameworks import breakpoint_key, idempotency_key, not_approved, run_id
from bpm_client.langgraph import decision, invoke
from bpm_client.openai_agents import Approvals
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph

from tests.support.langgraph_deploy import Deploy, graph


def test_keys_are_the_frameworks_names_in_the_services_form():
    assert breakpoint_key("langgraph", "Deploy_Prod") == "langgraph.deploy-prod"
    assert breakpoint_key("openai-agents", "scale") == "openai-agents.scale"


def test_an_idempotency_key_is_the_ids_and_a_digest_when_too_long():
    assert idempotency_key("langgraph", "t-1", "abc") == "langgraph.t-1.abc"
    long_thread = "t" * 300
    key = idempotency_key("langgraph", long_thread, "abc")
    assert len(key) <= 255 and key.startswith("langgraph.sha256.")
    assert key == idempotency_key("langgraph", long_thread, "abc")  # the same ids, the same key
    assert key != idempotency_key("langgraph", long_thread, "abd")


def test_a_run_id_longer_than_the_service_takes_is_left_out():
    assert run_id("deploy-42") == "deploy-42"
    assert run_id("x" * 129) is None and run_id(None) is None


@pytest.mark.parametrize(
    ("result", "said"),
    [
        (
            BreakpointResult(approved=False, responded_by="alice", feedback="no", status="released", breakpoint_id="bp_1"),
            "rejected by alice (approval request bp_1). Their feedback: no",
        ),
        (
            BreakpointResult(approved=False, status="expired", breakpoint_id="bp_1"),
            "nobody answered approval request bp_1 in time (it expired)",
        ),
        (
            BreakpointResult(approved=False, responded_by="agent:a", status="cancelled", breakpoint_id="bp_1"),
            "approval request bp_1 was cancelled by agent:a",
        ),
    ],
)  # fmt: skip
def test_what_a_refusal_tells_the_agent(result, said):
    assert not_approved(result) == said


def test_the_decision_a_node_gets_back_is_the_result_it_was_resumed_with():
    answer = {
        "breakpointId": "bp_1", "status": "released", "verified": True, "approved": True,
        "values": {"replicas": 5}, "edited": True, "feedback": "ok", "respondedBy": "alice",
    }  # fmt: skip
    result = decision(answer)
    assert (result.breakpoint_id, result.status, result.verified) == ("bp_1", "released", True)
    assert (result.approved, result.values, result.edited) == (True, {"replicas": 5}, True)
    assert result.responded_by == "alice" and result.extra == {}


def test_a_node_resumed_with_something_else_says_how_to_resume_it():
    with pytest.raises(TypeError, match="resume the graph with bpm_client.langgraph.invoke"):
        decision("yes")


def test_invoke_refuses_a_graph_without_a_checkpointer_or_a_thread():
    builder = StateGraph(Deploy)
    builder.add_node("noop", lambda state: {})
    builder.add_edge(START, "noop")
    builder.add_edge("noop", END)
    with pytest.raises(ValueError, match="needs a checkpointer"):
        invoke(builder.compile(), {}, {"configurable": {"thread_id": "t"}})
    with pytest.raises(ValueError, match="needs a thread id"):
        invoke(graph(InMemorySaver()), {}, {"configurable": {}})


def test_a_gated_tool_needs_approval_and_is_known_by_its_approvals():
    approvals, other = Approvals(), Approvals()

    @function_tool
    def restart(service: str) -> str:
        """Restart a service."""
        return "restarted"

    assert restart.needs_approval is False
    gated = approvals.gate(restart)
    assert gated is restart and restart.needs_approval is True
    assert approvals.gates(restart) and not other.gates(restart)
    invoker = restart.on_invoke_tool
    approvals.gate(restart)  # gating twice wraps once
    assert restart.on_invoke_tool is invoker
    Agent(name="ops", tools=[restart])  # still a tool the SDK takes


@pytest.mark.parametrize(
    ("module", "extra", "missing"),
    [("langgraph", "langgraph", "langgraph"), ("openai_agents", "openai-agents", "agents")],
)
def test_an_adapter_without_its_extra_names_the_extra_and_the_core_still_imports(
    module, extra, missing
):
    script = textwrap.dedent(f"""
        import sys
        sys.modules[{missing!r}] = None  # as if not installed
        import bpm_client
        assert not {{"langgraph", "agents"}} & set(sys.modules) - {{{missing!r}}}
        try:
            import bpm_client.{module}
        except ImportError as error:
            print(error)
        else:
            raise SystemExit("imported without {missing}")
    """)
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    message = done.stdout.strip()
    assert message.startswith(f"bpm_client.{module} needs {missing}, from the `{extra}` extra: ")
    assert message.endswith(f" './clients/python[{extra}]' (in the project's folder)")

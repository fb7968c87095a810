"""An MCP gateway's calls and grants: every call of a tool has the same key and every call
of a gateway the same run, and the arguments are the proposal, so a reviewer's grant
covers a coding session's repeated calls within its values."""

from bpm_client.bodies import breakpoint_body
from bpm_client.gateway.config import Defaults, Rule
from bpm_client.gateway.decisions import breakpoint_fields, gateway_run_id

from tests.support.grants import create, granted

SCHEMA = {
    "type": "object",
    "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
    "required": ["path", "content"],
}


def gated_call(path: str, run_id: str) -> dict:
    """What `bpm gateway` sends for a write_file call on the filesystem server."""
    question, fields = breakpoint_fields(
        server="filesystem",
        tool="write_file",
        description="Write a file.",
        schema=SCHEMA,
        arguments={"path": path, "content": "x"},
        rule=Rule(tools=("*",), action="ask"),
        defaults=Defaults(),
        run_id=run_id,
    )
    return breakpoint_body(question, **fields)


def call(path: str, run_id: str = "gateway-1"):
    body = gated_call(path, run_id)
    return create(
        agent_id="gateway",
        payload=body["payload"],
        title=body["title"],
        tags=body["tags"],
        run_id=body["runId"],
    )


def test_a_run_grant_with_a_path_prefix_covers_the_sessions_writes_under_it(reviewer):
    first = call("/srv/app/a.py")
    assert (
        first.run_id == "gateway-1"
        and first.key == gated_call("/x", "r")["payload"]["breakpointId"]
    )
    grant = granted(reviewer, first, scope="run", uses=10, values={"path": {"prefix": "/srv/app/"}})

    inside, outside = call("/srv/app/b.py"), call("/etc/hosts")
    another_session = call("/srv/app/c.py", run_id="gateway-2")

    assert (inside.status, inside.result["respondedBy"]) == ("released", f"grant:{grant.pk}")
    assert inside.result["values"] == {"path": "/srv/app/b.py", "content": "x"}
    assert outside.status == another_session.status == "waiting"


def test_the_gateways_run_is_the_environments_or_its_own():
    assert gateway_run_id({"BPM_RUN_ID": " ci-build-42 "}) == "ci-build-42"
    made, other = gateway_run_id({}), gateway_run_id({"BPM_RUN_ID": ""})
    assert made.startswith("gateway-") and other.startswith("gateway-") and made != other

"""expectedDecision on the agent's side: the SDK decodes it, `bpm ask` says it on stderr, the
MCP tools return it. The server's answers are scripted (a real HTTP server on 127.0.0.1);
tests/breakpoints/test_expected_decision.py shows the server computing them."""

import pytest
from bpm_client import Client
from bpm_client.cli import main
from bpm_client.models import ExpectedDecision

from tests.support.mcp import mcp_call
from tests.support.scripted import Answer, breakpoint_json, status_json

EXPECTED = {"p50Seconds": 240, "p90Seconds": 1320, "samples": 31, "basis": "key"}
RELEASED = {"approved": True, "respondedBy": "alice", "feedback": "go", "allResponses": []}


def test_the_sdk_decodes_it_on_the_create_answer_and_the_status(scripted):
    server = scripted(
        Answer(201, breakpoint_json(expectedDecision=EXPECTED)),
        Answer(200, status_json(expectedDecision=EXPECTED)),
    )
    with Client(server.url, "bpm_test", strict=True) as client:
        created = client.create("Ship?")
        status = client.status(created.breakpoint_id)

    assert created.expected_decision == ExpectedDecision(
        p50_seconds=240, p90_seconds=1320, samples=31, basis="key"
    )
    assert status.expected_decision == created.expected_decision


def test_bpm_ask_says_how_long_people_usually_take_on_stderr(scripted, capsys):
    server = scripted(
        Answer(201, breakpoint_json(expectedDecision=EXPECTED)),
        Answer(200, status_json(status="released", result=RELEASED, pollAfterMs=None)),
    )

    code = main(["--url", server.url, "--token", "bpm_test", "ask", "Ship?"])

    out, err = capsys.readouterr()
    assert code == 0
    assert "usually answered in about 4 min (p90 22 min)" in err.splitlines()
    assert "usually" not in out


def test_bpm_ask_says_nothing_of_it_without_figures(scripted, capsys):
    server = scripted(
        Answer(201, breakpoint_json()),
        Answer(200, status_json(status="released", result=RELEASED, pollAfterMs=None)),
    )

    assert main(["--url", server.url, "--token", "bpm_test", "ask", "Ship?"]) == 0
    assert "usually" not in capsys.readouterr().err


@pytest.mark.parametrize(
    ("p50", "p90", "said"),
    [
        (45, 80, "usually answered in about 45 s (p90 80 s)"),
        (240, 1320, "usually answered in about 4 min (p90 22 min)"),
        (5400, 9000, "usually answered in about 1.5 h (p90 2.5 h)"),
        (7200, 4 * 86400, "usually answered in about 2 h (p90 4 days)"),
    ],
)
def test_the_figures_read_as_people_say_durations(p50, p90, said):
    expected = ExpectedDecision(p50_seconds=p50, p90_seconds=p90, samples=20, basis="all")
    assert expected.describe() == said


def test_request_human_approval_says_it_in_its_progress_while_it_waits(scripted):
    server = scripted(
        Answer(201, breakpoint_json(expectedDecision=EXPECTED)),
        Answer(200, status_json(status="released", result=RELEASED, pollAfterMs=None)),
    )
    progress: list[str] = []

    result = mcp_call(server.url, "request_human_approval", {"question": "Ship?"}, progress)

    assert result.structured_content["approved"] is True
    assert progress and all(
        message.endswith("; usually answered in about 4 min (p90 22 min))") for message in progress
    )


def test_the_mcp_tools_return_it_while_waiting_and_null_once_decided(scripted):
    waiting = scripted(Answer(201, breakpoint_json(expectedDecision=EXPECTED)))
    created = mcp_call(waiting.url, "create_breakpoint", {"question": "Ship?"})
    assert created.structured_content["expectedDecision"] == EXPECTED

    decided = scripted(
        Answer(200, status_json(status="released", result=RELEASED, pollAfterMs=None)),
        Answer(200, breakpoint_json(status="released", result=RELEASED)),
    )
    answer = mcp_call(decided.url, "get_breakpoint_status", {"breakpoint_id": "bp_1"})
    assert answer.structured_content["expectedDecision"] is None

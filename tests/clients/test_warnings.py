"""What the SDK, `bpm` and `bpm mcp` tell their caller besides the answer: a context file cut
for length, and the create answer's `warnings` (payload keys that look misspelt).

`bpm` and the MCP tools send only keys they know, so the server's warnings are scripted here
(a real HTTP server on 127.0.0.1); tests/breakpoints/test_api_create.py shows the server
writing them.
"""

import json

import pytest
from bpm_client import Client
from bpm_client.bodies import MAX_FILE_CHARS, ContextFileCut, context_file
from bpm_client.cli import main

from tests.support.mcp import mcp_call, text_of
from tests.support.scripted import Answer, breakpoint_json

MISSPELT = "payload.questoin: did you mean question?"
CUT = (
    f"big.log: {MAX_FILE_CHARS + 5:,} bytes; only the first {MAX_FILE_CHARS:,} characters are sent"
)


@pytest.fixture
def big_file(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "big.log").write_text("x" * (MAX_FILE_CHARS + 5))
    return "big.log"


def sent_content(server) -> str:
    (request,) = server.seen
    return json.loads(request.body)["payload"]["context"]["files"][0]["content"]


def test_the_sdk_warns_when_it_cuts_a_file(big_file):
    with pytest.warns(ContextFileCut, match=CUT):
        entry = context_file(big_file)
    assert entry["content"].startswith("x" * MAX_FILE_CHARS)
    assert "cut by bpm" in entry["content"][MAX_FILE_CHARS:]


def test_the_sdk_decodes_the_create_answer_s_warnings(scripted):
    server = scripted(Answer(201, breakpoint_json(warnings=[MISSPELT])))
    with Client(server.url, "bpm_test", strict=True) as client:
        created = client.create("Ship?", payload={"questoin": "Ship?"})
    assert created.warnings == [MISSPELT]


def test_bpm_create_prints_each_warning_on_stderr_and_only_the_id_on_stdout(scripted, capsys):
    server = scripted(Answer(201, breakpoint_json(warnings=[MISSPELT, "payload.x: y"])))

    code = main(["--url", server.url, "--token", "bpm_test", "create", "Ship?"])

    out, err = capsys.readouterr()
    assert code == 0 and out == "bp_1\n"
    assert err.splitlines() == [f"bpm: warning: {MISSPELT}", "bpm: warning: payload.x: y"]


def test_bpm_ask_says_on_stderr_that_a_file_was_cut(scripted, capsys, big_file):
    """Cut at MAX_FILE_CHARS (the reviewer sees a note), and no longer without a word."""
    released = {"approved": True, "respondedBy": "rule:rule-1"}
    server = scripted(
        Answer(201, breakpoint_json(status="released", result=released, warnings=[MISSPELT]))
    )

    code = main(["--url", server.url, "--token", "bpm_test", "ask", "Ship?", "--file", big_file])

    err = capsys.readouterr().err
    assert code == 0
    assert f"bpm: warning: {CUT}" in err.splitlines()
    assert f"bpm: warning: {MISSPELT}" in err.splitlines()
    assert len(sent_content(server)) < MAX_FILE_CHARS + 100


def test_the_mcp_tool_result_carries_the_warnings(scripted, big_file):
    server = scripted(Answer(201, breakpoint_json(warnings=[MISSPELT])))

    result = mcp_call(server.url, "create_breakpoint", {"question": "Ship?", "files": [big_file]})

    assert not result.is_error
    assert result.structured_content["warnings"] == [CUT, MISSPELT]
    assert json.loads(text_of(result))["warnings"] == [CUT, MISSPELT]

"""What `bpm mcp`'s tools return: the API's result as the API writes it, in both the text and
the structured content (issue 31: `+00:00` for the API's `Z`; no payloadDigest or receipt in
structuredContent)."""

import json

from tests.support.mcp import mcp_call, text_of
from tests.support.scripted import NOW, Answer, breakpoint_json, status_json

RESULT = {
    "approved": True,
    "response": "go",
    "feedback": "go",
    "respondedBy": "alice",
    "allResponses": [
        {"respondedBy": "alice", "approved": True, "feedback": "go", "respondedAt": NOW}
    ],
    "payloadDigest": "sha256:" + "ab" * 32,
    "receipt": "eyJhbGciOiJFZERTQSJ9.e30.c2ln",
}


def test_a_decision_is_returned_with_the_api_s_times_digest_and_receipt(scripted):
    server = scripted(
        Answer(200, status_json(status="released", result=RESULT, pollAfterMs=None)),
        Answer(200, breakpoint_json(status="released", result=RESULT)),
    )

    result = mcp_call(server.url, "get_breakpoint_status", {"breakpoint_id": "bp_1"})

    assert not result.is_error
    structured = result.structured_content
    assert structured["allResponses"][0]["respondedAt"] == NOW  # "…Z", as the API wrote it
    assert structured["payloadDigest"] == RESULT["payloadDigest"]
    assert structured["receipt"] == RESULT["receipt"]
    assert json.loads(text_of(result)) == structured  # the text says the same
    # The console link is the server's consoleUrl (read once: it did not create this one).
    assert structured["consoleUrl"] == breakpoint_json()["consoleUrl"]
    assert [seen.path for seen in server.seen] == [
        "/api/breakpoints/bp_1/status",
        "/api/breakpoints/bp_1",
    ]


def test_a_waiting_breakpoint_has_every_key_of_a_decision_empty(scripted):
    server = scripted(Answer(200, status_json()), Answer(200, breakpoint_json()))

    result = mcp_call(server.url, "get_breakpoint_status", {"breakpoint_id": "bp_1"})

    structured = result.structured_content
    assert structured["status"] == "waiting" and structured["approved"] is None
    assert structured["payloadDigest"] is None and structured["receipt"] is None
    assert json.loads(text_of(result)) == structured

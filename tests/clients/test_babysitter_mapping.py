"""How `bpm babysitter` maps a babysitter effect to a request, and a decision back to the
value the run's process receives (no server: bpm_client.babysitter.mapping alone)."""

from datetime import UTC, datetime
from pathlib import Path

from bpm_client.babysitter import Effect, Run, breakpoint_request, run_answer
from bpm_client.babysitter.mapping import canonical_key
from bpm_client.models import BreakpointResult, NotVisible, StatusEntry

EFFECT_ID = "01M8CPG4BZAX8YZG7PA3RSNM3K"


def effect(tmp_path: Path, payload, **metadata) -> Effect:
    run = Run("01RUN", tmp_path / ".a5c" / "runs" / "01RUN")
    task = {
        "kind": "breakpoint",
        "effectId": EFFECT_ID,
        "invocationKey": "p:S000001:__sdk.breakpoint",
        "metadata": {"payload": payload, "label": "breakpoint", **metadata},
    }
    return Effect.of(run, task)


def test_the_payload_is_sent_with_its_own_keys_and_the_run_as_run_id(tmp_path):
    payload = {"question": "Ship?", "autoApproveAfterN": 3, "breakpointId": "ship.it"}
    request = breakpoint_request(effect(tmp_path, payload), tmp_path)
    assert request["payload"] == payload
    assert request["run_id"] == "01RUN"
    assert request["title"] is None  # the SDK's default label names nothing
    assert request["tags"] == ["babysitter", EFFECT_ID]


def test_options_fill_what_the_payload_leaves_out_and_the_label_titles_it(tmp_path):
    given = effect(
        tmp_path,
        {"question": "Drop it?", "tags": ["db"]},
        label="drop-table",
        expert=["dba"],
        strategy="quorum",
        tags=["db", "risky"],
    )
    request = breakpoint_request(given, tmp_path)
    assert request["title"] == "drop-table"
    assert request["payload"]["expert"] == ["dba"]
    assert request["payload"]["strategy"] == "quorum"
    assert request["tags"] == ["db", "risky", "babysitter", EFFECT_ID]


def test_a_bare_string_payload_becomes_the_question(tmp_path):
    request = breakpoint_request(effect(tmp_path, "Continue?"), tmp_path)
    assert request["payload"] == {"question": "Continue?"}


def test_context_files_are_read_relative_to_the_project(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "plan.md").write_text("# Plan\n")
    files = [
        {"path": "docs/plan.md", "format": "markdown"},
        {"path": str(tmp_path / "docs" / "plan.md")},  # absolute, inside the project
        {"path": "missing.txt"},
        {"path": "given.txt", "content": "as sent"},
    ]
    request = breakpoint_request(effect(tmp_path, {"context": {"files": files}}), tmp_path)
    sent = request["payload"]["context"]["files"]
    assert sent[0] == {"path": "docs/plan.md", "format": "markdown", "content": "# Plan\n"}
    assert sent[1] == {"path": "docs/plan.md", "content": "# Plan\n"}
    assert sent[2] == {
        "path": "missing.txt",
        "format": "text",
        "content": "[bpm babysitter left out missing.txt: it cannot be read (No such file or "
        "directory). Nothing of it was sent.]",
    }
    assert sent[3] == {"path": "given.txt", "content": "as sent"}


def test_a_breakpoint_id_is_made_a_key_the_service_takes():
    assert canonical_key("deploy.plan") == "deploy.plan"
    assert canonical_key("Deploy Plan.Prod_EU") == "deploy-plan.prod-eu"
    assert canonical_key("!!!") is None


def entry(status, result=None, error=None) -> StatusEntry:
    return StatusEntry(
        breakpoint_id="bp-1",
        status=status,
        updated_at=datetime(2025, 1, 1, tzinfo=UTC),
        result=result,
        error=error,
    )


def test_a_release_is_posted_as_the_services_result():
    result = BreakpointResult(approved=False, response="No", feedback="No", responded_by="al")
    assert run_answer(entry("released", result)) == {
        "approved": False,
        "response": "No",
        "feedback": "No",
        "respondedBy": "al",
        "allResponses": [],
        "status": "released",
        "breakpointId": "bp-1",
    }


def test_an_expiry_or_cancellation_is_a_rejection_that_says_why():
    expired = run_answer(entry("expired", BreakpointResult(approved=False, feedback="Too late")))
    assert expired["approved"] is False and expired["feedback"] == "Too late"
    cancelled = run_answer(entry("cancelled", BreakpointResult(approved=False)))
    assert cancelled["feedback"] == "The breakpoint was cancelled in Breakpoint Manager."
    gone = run_answer(entry(None, error=NotVisible(code="not_found", message="gone")))
    assert gone["approved"] is False and gone["status"] == "deleted"


FORM = {"type": "object", "properties": {"replicas": {"type": "integer"}}}


def test_a_processs_form_and_proposal_pass_through_from_the_payload_or_its_options(tmp_path):
    in_payload = {"question": "Scale?", "form": FORM, "proposal": {"replicas": 3}}
    from_options = effect(tmp_path, {"question": "Scale?"}, form=FORM, proposal={"replicas": 3})

    assert breakpoint_request(effect(tmp_path, in_payload), tmp_path)["payload"] == in_payload
    assert breakpoint_request(from_options, tmp_path)["payload"] == in_payload


def test_the_approved_values_are_posted_to_the_run():
    result = BreakpointResult(approved=True, responded_by="al", values={"replicas": 2}, edited=True)
    answer = run_answer(entry("released", result))
    assert (answer["values"], answer["edited"]) == ({"replicas": 2}, True)

"""Answering a breakpoint's form from Slack (issue 36): "Edit and approve" opens a modal
with the form's simple fields prefilled with the proposal; its signed submission approves
with the values as left, through the service (its problems answered on the fields'
blocks); a form a modal cannot show offers "Approve as proposed" and the console."""

from breakpoints.models import Breakpoint
from tests.support.slack import action_ids, all_text, announce, interact

pytest_plugins = ["tests.support.slack"]  # standin, people, slack_route

FORM = {
    "type": "object",
    "properties": {
        "environment": {"type": "string", "title": "Environment", "enum": ["staging", "prod"]},
        "replicas": {"type": "integer", "minimum": 1, "maximum": 10, "multipleOf": 1},
        "ratio": {"type": "number"},
        "notify": {"type": "boolean", "title": "Notify the team"},
        "reason": {"type": "string", "description": "Why"},
    },
    "required": ["environment", "replicas"],
}
PROPOSAL = {"environment": "prod", "replicas": 3, "notify": True, "reason": "release"}
PLAN = {"title": "Deploy", "question": "Ship it?", "form": FORM, "proposal": PROPOSAL}


def open_edit_modal(client, standin, bp) -> tuple[str, dict]:
    reply = announce(bp)
    clicked = standin.click_payload(reply["channel"], reply["ts"], "bpm_edit", "U0RITA")
    assert interact(client, clicked).status_code == 200
    (opened,) = standin.succeeded("views.open")
    (view_id,) = standin.views
    return view_id, opened["view"]


def entries(view: dict) -> dict[str, dict]:
    """The input blocks by their label."""
    return {b["label"]["text"]: b for b in view["blocks"] if b["type"] == "input"}


def state(view: dict, **answers) -> dict:
    """The state.values Slack sends: each field as prefilled, unless `answers` says."""
    values = {}
    for label, block in entries(view).items():
        element = block["element"]
        entry = {"type": element["type"]}
        if element["type"] == "static_select":
            chosen = answers.get(label, element.get("initial_option", {}).get("value"))
            entry["selected_option"] = {"value": chosen} if chosen else None
        elif element["type"] == "checkboxes":
            checked = answers.get(label, bool(element.get("initial_options")))
            entry["selected_options"] = element["options"] if checked else []
        else:
            entry["value"] = answers.get(label, element.get("initial_value"))
        values[block["block_id"]] = {element["action_id"]: entry}
    return values


def submission(standin, view_id: str, view: dict, **answers) -> dict:
    payload = standin.submit_payload(view_id, "U0RITA", None)
    payload["view"]["state"] = {"values": state(view, **answers)}
    return payload


def posted_blocks(standin, reply: dict) -> list[dict]:
    return standin.message(reply["channel"], reply["ts"])["blocks"]


def test_the_message_offers_edit_and_approve(standin, slack_route, make_breakpoint):
    reply = announce(make_breakpoint(payload=PLAN))

    blocks = posted_blocks(standin, reply)
    assert action_ids(blocks)[:3] == ["bpm_approve", "bpm_edit", "bpm_reject"]
    assert "Approve as proposed" in all_text(blocks)


def test_the_modal_holds_the_simple_fields_prefilled(standin, slack_route, make_breakpoint, client):
    bp = make_breakpoint(payload=PLAN)

    _, view = open_edit_modal(client, standin, bp)

    fields = entries(view)
    # Required first, in the order of `required`, then by name (jsonb keeps no key order).
    assert list(fields) == ["Environment", "replicas", "Notify the team", "ratio", "reason"]
    assert fields["Environment"]["element"]["initial_option"]["value"] == "prod"
    replicas = fields["replicas"]["element"]
    assert (replicas["type"], replicas["initial_value"]) == ("number_input", "3")
    assert (replicas["min_value"], replicas["max_value"]) == ("1", "10")
    assert replicas["is_decimal_allowed"] is False
    assert fields["ratio"]["element"]["is_decimal_allowed"] is True
    assert fields["Notify the team"]["element"]["initial_options"]
    assert fields["reason"]["element"]["initial_value"] == "release"
    assert fields["reason"]["hint"]["text"] == "Why"
    assert fields["replicas"]["optional"] is False and fields["ratio"]["optional"] is True
    assert bp.pk in view["private_metadata"]


def test_a_signed_submission_approves_with_the_edited_values(
    standin, slack_route, make_breakpoint, client, agent_client
):
    bp = make_breakpoint(payload=PLAN)
    view_id, view = open_edit_modal(client, standin, bp)

    sent = interact(
        client,
        submission(standin, view_id, view, Environment="staging", replicas="5", ratio="0.5"),
    )

    assert (sent.status_code, sent.content) == (200, b"")  # closes the modal
    result = agent_client.get(f"/api/breakpoints/{bp.pk}/status").json()["result"]
    assert result["approved"] is True
    assert result["respondedBy"] == "rita"
    assert result["values"] == {
        "environment": "staging",
        "replicas": 5,
        "ratio": 0.5,
        "notify": True,
        "reason": "release",
    }
    assert result["edited"] is True


def test_the_services_problems_are_answered_on_the_fields_blocks(
    standin, slack_route, make_breakpoint, client
):
    bp = make_breakpoint(payload=PLAN)
    view_id, view = open_edit_modal(client, standin, bp)
    blocks = {label: block["block_id"] for label, block in entries(view).items()}

    out_of_bounds = interact(client, submission(standin, view_id, view, replicas="12"))
    not_whole = interact(client, submission(standin, view_id, view, replicas="2.5"))
    missing = interact(client, submission(standin, view_id, view, Environment=None))

    answer = out_of_bounds.json()
    assert answer["response_action"] == "errors"
    assert list(answer["errors"]) == [blocks["replicas"]]
    assert "10" in answer["errors"][blocks["replicas"]]
    assert not_whole.json()["errors"] == {blocks["replicas"]: "A whole number."}
    assert missing.json()["errors"] == {blocks["Environment"]: "Required."}
    assert Breakpoint.objects.get(pk=bp.pk).status == "waiting"


def test_a_submission_forged_without_signature_is_refused(
    standin, slack_route, make_breakpoint, client
):
    bp = make_breakpoint(payload=PLAN)
    view_id, view = open_edit_modal(client, standin, bp)

    forged = interact(client, submission(standin, view_id, view), secret="not-the-secret")

    assert forged.status_code == 401
    assert Breakpoint.objects.get(pk=bp.pk).status == "waiting"


def test_a_form_a_modal_cannot_show_is_approved_as_proposed(
    standin, slack_route, make_breakpoint, client, agent_client
):
    form = {"type": "object", "properties": {"hosts": {"type": "array"}}}
    bp = make_breakpoint(payload={**PLAN, "form": form, "proposal": {"hosts": ["a"]}})
    reply = announce(bp)

    blocks = posted_blocks(standin, reply)
    assert "bpm_edit" not in action_ids(blocks)
    text = all_text(blocks)
    assert "Approve as proposed" in text and "edit it in the console" in text
    assert "bpm_console" in action_ids(blocks)
    clicked = standin.click_payload(reply["channel"], reply["ts"], "bpm_approve", "U0RITA")
    assert interact(client, clicked).status_code == 200
    result = agent_client.get(f"/api/breakpoints/{bp.pk}/status").json()["result"]
    assert (result["approved"], result["values"], result["edited"]) == (
        True,
        {"hosts": ["a"]},
        False,
    )

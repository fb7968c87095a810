"""Reviewers answer a form (issue 36): payload.form and payload.proposal at creation, the
values of a release, result.values/edited, valuesDigest in the receipt, and automatic
approvals that approve the proposal as it is. Through the API, on the real database."""

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from audit.models import Event
from breakpoints.models import Breakpoint
from breakpoints.payload import form_schema
from breakpoints.services import breakpoints_expire_due
from core import limits
from core.actors import Actor
from core.digests import values_digest
from core.receipts import verify
from policies.autoapproval import rule_create
from tests.support.api import assert_error
from tests.support.forms import DEPLOY_FORM as OPEN_DEPLOY_FORM
from tests.support.forms import DEPLOY_PROPOSAL
from tests.support.receipts import suite_jwks
from tests.support.records import backdate_expiry

URL = "/api/breakpoints"
SYSTEM = Actor.system("test")

DEPLOY_FORM = {**OPEN_DEPLOY_FORM, "additionalProperties": False}
PROPOSAL = DEPLOY_PROPOSAL


def create(client, **payload):
    body = {"payload": {"question": "Deploy?", "title": "Deploy", **payload}}
    return client.post(URL, body, format="json")


def created(client, **payload) -> dict:
    response = create(client, **payload)
    assert response.status_code == 201, response.content
    return response.json()


def release(client, bp_id: str, **body):
    return client.post(f"{URL}/{bp_id}/feedback", {"release": True, **body}, format="json")


def released(client, bp_id: str, **body) -> dict:
    response = release(client, bp_id, **body)
    assert response.status_code == 201, response.content
    return response.json()["result"]


def claims_of(result: dict) -> dict:
    return verify(result["receipt"], suite_jwks())


# --- creation ----------------------------------------------------------------------------


def test_a_form_and_its_proposal_are_stored_as_sent(agent_client):
    body = created(agent_client, form=DEPLOY_FORM, proposal=PROPOSAL)

    assert body["payload"]["form"] == DEPLOY_FORM
    assert body["payload"]["proposal"] == PROPOSAL
    assert body["warnings"] == []


@pytest.mark.parametrize(
    "form, problem",
    [
        ({"type": "object", "properties": {"x": {"type": "nope"}}}, "/properties/x/type"),
        ({"type": "array"}, "type: Must be 'object'"),
        ([{"type": "object"}], "Must be a JSON Schema"),
        ({"type": "object", "$schema": "http://json-schema.org/draft-04/schema#"}, "2020-12"),
        ({"type": "object", "properties": {"x": {"minLength": -1}}}, "/properties/x/minLength"),
    ],
)
def test_an_invalid_schema_is_a_400_naming_the_problem(agent_client, form, problem):
    error = assert_error(create(agent_client, form=form), 400)

    assert any(problem in message for message in error["details"]["payload.form"])
    assert not Breakpoint.objects.exists()


@pytest.mark.parametrize(
    "form, problem",
    [
        (
            {"type": "object", "properties": {"x": {"$ref": "https://example.com/s.json"}}},
            "/properties/x/$ref: Must be '#' or '#/$defs/<name>'",
        ),
        ({"type": "object", "$ref": "#/$defs/missing"}, "has no 'missing'"),
        (
            {"type": "object", "properties": {"x": {"type": "string", "pattern": "(?=a)"}}},
            "/properties/x/pattern: Not a pattern RE2 can match",
        ),
        ({"type": "object", "properties": {"x": {"pattern": r"(a)\1"}}}, "back-references"),
        (
            {"type": "object", "properties": {"x": {"pattern": "a" * 201}}},
            f"At most {limits.MAX_FORM_PATTERN_LENGTH} characters",
        ),
        ({"type": "object", "patternProperties": {"^a": {}}}, "/patternProperties: Not supported"),
        ({"type": "object", "$defs": {"a": {"$dynamicAnchor": "a"}}}, "$dynamicAnchor"),
        ({"type": "object", "properties": {"x": {"$id": "https://x.test/"}}}, "/properties/x/$id"),
    ],
)
def test_a_hostile_schema_is_refused_at_creation(agent_client, form, problem):
    error = assert_error(create(agent_client, form=form), 400)

    assert any(problem in message for message in error["details"]["payload.form"]), error


def test_a_property_named_pattern_is_a_field_not_a_pattern(agent_client):
    form = {"type": "object", "properties": {"pattern": {"type": "string"}}}

    assert created(agent_client, form=form)["payload"]["form"] == form


def test_a_form_past_its_size_or_depth_is_refused(agent_client):
    big = {"type": "object", "description": "x" * limits.MAX_FORM_BYTES}
    deep: dict = {"type": "object"}
    for _ in range(limits.MAX_FORM_DEPTH):
        deep = {"type": "object", "properties": {"x": deep}}

    big_error = assert_error(create(agent_client, form=big), 400)
    deep_error = assert_error(create(agent_client, form=deep), 400)

    assert "bytes" in big_error["details"]["payload.form"][0]
    assert "levels deep" in deep_error["details"]["payload.form"][0]


class _CountingHandler(BaseHTTPRequestHandler):
    hits: list[str] = []

    def do_GET(self):  # noqa: N802 (http.server's name)
        self.hits.append(self.path)
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(b'{"type": "string"}')

    def log_message(self, *args):
        pass


def test_a_remote_ref_is_never_fetched_even_past_the_creation_checks():
    """Defence in depth: validation's registry refuses retrieval (a server on 127.0.0.1
    that would answer is never asked)."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _CountingHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        remote = f"http://127.0.0.1:{server.server_port}/schema.json"
        form = {"type": "object", "properties": {"x": {"$ref": remote}}}
        problems = form_schema.values_problems(form, {"x": 1})
    finally:
        server.shutdown()
        server.server_close()
    assert _CountingHandler.hits == []
    assert "does not hold" in problems[""][0]


def test_a_form_that_refers_to_itself_without_end_is_refused_and_answered_not_crashed(settings):
    """Refused when declared; one stored before that was refused is answered, not crashed."""
    # What answers is the walk's own check, not the time backstop a loaded machine can reach
    # first (tests/breakpoints/test_form_costs.py tests the backstop).
    settings.BPM_FORM_VALIDATION_SECONDS = 60.0
    form = {"type": "object", "$defs": {"a": {"$ref": "#/$defs/a"}}, "$ref": "#/$defs/a"}

    assert form_schema.form_problems(form) == [
        "/$defs/a: Applies itself without end ($ref, allOf, anyOf, oneOf... with no field in "
        "between): it could never check an answer."
    ]
    assert "without end" in form_schema.values_problems(form, {})[""][0]


def test_a_proposal_that_does_not_answer_the_form_is_a_400_with_each_problem(agent_client):
    proposal = {"environment": "moon", "replicas": 12, "extra": 1}

    error = assert_error(create(agent_client, form=DEPLOY_FORM, proposal=proposal), 400)

    details = error["details"]
    assert set(details) == {
        "payload.proposal/environment",
        "payload.proposal/replicas",
        "payload.proposal/extra",
    }
    assert "maximum of 10" in details["payload.proposal/replicas"][0]
    assert details["payload.proposal/extra"] == ["Not a field of this form."]


def test_a_proposal_must_be_an_object(agent_client):
    error = assert_error(create(agent_client, proposal=[1, 2]), 400)

    assert error["details"]["payload.proposal"] == ["Must be an object."]


# --- releases ----------------------------------------------------------------------------


def test_edited_values_are_validated_stored_and_bound_into_the_receipt(
    agent_client, reviewer_client
):
    bp = created(agent_client, form=DEPLOY_FORM, proposal=PROPOSAL)
    values = {"environment": "staging", "replicas": 2, "notify": False}

    result = released(reviewer_client, bp["breakpointId"], values=values)

    assert (result["approved"], result["values"], result["edited"]) == (True, values, True)
    assert result["allResponses"][0]["values"] == values
    assert result["valuesDigest"] == values_digest(values)
    assert claims_of(result)["valuesDigest"] == values_digest(values)
    polled = agent_client.get(f"{URL}/{bp['breakpointId']}/status").json()["result"]
    assert (polled["values"], polled["edited"]) == (values, True)


def test_values_that_do_not_answer_the_form_are_a_400_keyed_by_json_pointer(
    agent_client, reviewer_client
):
    bp = created(agent_client, form=DEPLOY_FORM, proposal=PROPOSAL)

    response = release(reviewer_client, bp["breakpointId"], values={"replicas": 0, "x": "y"})

    error = assert_error(response, 400)
    assert set(error["details"]) == {"/replicas", "/environment", "/x"}
    assert error["details"]["/environment"] == ["Required."]
    assert "minimum of 1" in error["details"]["/replicas"][0]
    assert Breakpoint.objects.get(pk=bp["breakpointId"]).status == "waiting"


def test_approving_without_values_approves_the_proposal_as_it_is(agent_client, reviewer_client):
    bp = created(agent_client, form=DEPLOY_FORM, proposal=PROPOSAL)

    result = released(reviewer_client, bp["breakpointId"])

    assert (result["values"], result["edited"]) == (PROPOSAL, False)
    assert claims_of(result)["valuesDigest"] == values_digest(PROPOSAL)


def test_approving_without_values_a_required_form_without_proposal_is_a_400(
    agent_client, reviewer_client
):
    bp = created(agent_client, form=DEPLOY_FORM)

    error = assert_error(release(reviewer_client, bp["breakpointId"]), 400)

    assert set(error["details"]) == {"/environment", "/replicas"}
    result = released(
        reviewer_client, bp["breakpointId"], values={"environment": "prod", "replicas": 1}
    )
    assert (result["values"], result["edited"]) == ({"environment": "prod", "replicas": 1}, True)


def test_values_on_a_breakpoint_without_form_or_proposal_are_a_400(agent_client, reviewer_client):
    bp = created(agent_client)

    error = assert_error(release(reviewer_client, bp["breakpointId"], values={"a": 1}), 400)

    assert "no form or proposal" in error["details"]["values"][0]


def test_a_plain_breakpoints_result_has_no_values(agent_client, reviewer_client):
    bp = created(agent_client)

    result = released(reviewer_client, bp["breakpointId"])

    assert (result["values"], result["edited"], result["valuesDigest"]) == (None, False, None)
    assert claims_of(result)["valuesDigest"] is None


def test_a_rejection_carries_no_values(agent_client, reviewer_client):
    bp = created(agent_client, form=DEPLOY_FORM, proposal=PROPOSAL)

    refused = release(reviewer_client, bp["breakpointId"], approved=False, values=PROPOSAL)
    assert "rejection carries no values" in assert_error(refused, 400)["message"]

    result = released(reviewer_client, bp["breakpointId"], approved=False)
    assert (result["values"], result["edited"], result["valuesDigest"]) == (None, False, None)


def test_a_comment_carries_no_values(agent_client, reviewer_client):
    bp = created(agent_client, form=DEPLOY_FORM, proposal=PROPOSAL)

    body = {"comment": "hm", "values": PROPOSAL}
    response = reviewer_client.post(f"{URL}/{bp['breakpointId']}/feedback", body, format="json")

    assert "with a release" in assert_error(response, 400)["message"]


def test_a_proposal_without_form_takes_any_object(agent_client, reviewer_client):
    bp = created(agent_client, proposal={"sql": "select 1"})

    not_object = release(reviewer_client, bp["breakpointId"], values="select 3")
    assert_error(not_object, 400)
    result = released(reviewer_client, bp["breakpointId"], values={"sql": "select 2", "n": [1]})

    assert (result["values"], result["edited"]) == ({"sql": "select 2", "n": [1]}, True)


def test_values_beyond_the_limits_are_refused(agent_client, reviewer_client):
    bp = created(agent_client, proposal={"a": 1})

    big = {"a": "x" * limits.MAX_VALUES_BYTES}
    huge_number = {"a": 2**60}
    long_text = {"type": "object", "properties": {"a": {"type": "string", "pattern": "^a"}}}
    bounded = created(agent_client, form=long_text)

    assert (
        "bytes"
        in assert_error(release(reviewer_client, bp["breakpointId"], values=big), 400)["details"][
            "values"
        ][0]
    )
    assert_error(release(reviewer_client, bp["breakpointId"], values=huge_number), 400)
    too_long = release(reviewer_client, bounded["breakpointId"], values={"a": "a" * 1001})
    assert (
        "characters for a field with a pattern" in assert_error(too_long, 400)["details"]["/a"][0]
    )


def test_edited_compares_as_json(agent_client, reviewer_client):
    form = {"type": "object", "properties": {"n": {"type": "number"}}}
    bp = created(agent_client, form=form, proposal={"n": 1})

    result = released(reviewer_client, bp["breakpointId"], values={"n": 1.0})

    assert result["edited"] is False


# --- votes -------------------------------------------------------------------------------


@pytest.fixture
def seat_clients(three_experts, client_for) -> dict:
    return {seat: client_for(user) for seat, user in three_experts.items()}


def test_collect_all_is_released_only_with_the_values_every_approving_seat_approved(
    agent_client, expert_member, client_for, admin_client
):
    """dana approves the proposal, bob other values, root answers for carol's seat with a
    third set: neither later vote is taken, so nobody's values win alone; once every seat
    approves the same values they are released, and the receipt names each approver."""
    dana = client_for(expert_member("dana", "tech-lead"))
    bob = client_for(expert_member("bob", "ops-lead"))
    expert_member("carol", "security-lead")
    bp = created(
        agent_client,
        form=DEPLOY_FORM,
        proposal=PROPOSAL,
        expert=["tech-lead", "ops-lead", "security-lead"],
        strategy="collect-all",
    )
    bp_id = bp["breakpointId"]
    assert release(dana, bp_id).json()["status"] == "waiting"

    bobs = release(bob, bp_id, values={**PROPOSAL, "replicas": 1})
    roots = release(admin_client, bp_id, values={"environment": "staging", "replicas": 9})

    error = assert_error(bobs, 409, "invalid_state")
    assert "tech-lead (dana) approved other values" in error["message"]
    assert error["details"]["differingValues"] == ["/replicas"]
    assert error["details"]["approvedValues"] == PROPOSAL
    differing = assert_error(roots, 409, "invalid_state")["details"]["differingValues"]
    assert differing == ["/environment", "/notify", "/replicas"]
    stored = Breakpoint.objects.get(pk=bp_id)
    assert (stored.status, [v["respondedBy"] for v in stored.votes]) == ("waiting", ["dana"])
    assert not stored.result
    refused = Event.objects.filter(breakpoint_id=bp_id, type="refused").order_by("pk")
    assert [event.actor for event in refused] == ["api:bob", "api:root-admin"]

    assert release(bob, bp_id, values=PROPOSAL).json()["status"] == "waiting"
    result = released(admin_client, bp_id, values={**PROPOSAL, "replicas": 3.0})

    assert [vote["values"] for vote in result["allResponses"]] == [PROPOSAL, PROPOSAL, PROPOSAL]
    assert (result["values"], result["edited"]) == (PROPOSAL, False)
    approvers = [
        {"seat": "tech-lead", "respondedBy": "dana"},
        {"seat": "ops-lead", "respondedBy": "bob"},
        {"seat": "security-lead", "respondedBy": "root-admin"},
    ]
    assert result["approvers"] == approvers
    claims = claims_of(result)
    assert claims["valuesDigest"] == values_digest(PROPOSAL)
    assert claims["approvers"] == approvers


def test_a_quorums_rejection_is_not_held_up_by_differing_values(agent_client, seat_clients):
    """Only approvals must agree: a seat may still reject, whatever was approved before."""
    bp = created(
        agent_client,
        form=DEPLOY_FORM,
        proposal=PROPOSAL,
        expert=["tech-lead", "ops-lead", "security-lead"],
        strategy="quorum",
    )
    release(seat_clients["tech-lead"], bp["breakpointId"], values={**PROPOSAL, "replicas": 2})
    release(seat_clients["ops-lead"], bp["breakpointId"], approved=False, comment="No")

    result = released(seat_clients["security-lead"], bp["breakpointId"], approved=False)

    assert (result["approved"], result["values"]) == (False, None)
    assert result["approvers"] == [{"seat": "tech-lead", "respondedBy": "tina"}]
    assert claims_of(result)["approvers"] == result["approvers"]


# --- automatic approvals -----------------------------------------------------------------


def test_a_rule_approves_the_proposal_as_it_is(agent_client):
    rule_create(actor=SYSTEM, pattern="deploy")

    body = created(agent_client, form=DEPLOY_FORM, proposal=PROPOSAL)

    assert body["status"] == "released"
    assert (body["result"]["values"], body["result"]["edited"]) == (PROPOSAL, False)
    assert claims_of(body["result"])["valuesDigest"] == values_digest(PROPOSAL)


def test_a_required_form_without_proposal_is_never_auto_approved(agent_client):
    rule_create(actor=SYSTEM, pattern="deploy")

    body = created(agent_client, form=DEPLOY_FORM)

    assert body["status"] == "waiting"
    assert body["autoApproval"]["recommended"] is False
    assert "form has required fields and no proposal" in body["autoApproval"]["reason"]


def test_on_timeout_approve_is_refused_at_creation_for_a_required_form_without_proposal(
    agent_client,
):
    error = assert_error(create(agent_client, form=DEPLOY_FORM, onTimeout="approve"), 400)

    assert "nothing to approve as it is" in error["details"]["payload.onTimeout"][0]


def test_on_timeout_approve_approves_the_proposal_as_it_is(agent_client):
    body = agent_client.post(
        URL,
        {
            "payload": {
                "title": "Deploy",
                "form": DEPLOY_FORM,
                "proposal": PROPOSAL,
                "onTimeout": "approve",
            },
            "ttlSeconds": 60,
        },
        format="json",
    ).json()
    backdate_expiry(body["breakpointId"])

    breakpoints_expire_due()

    result = Breakpoint.objects.get(pk=body["breakpointId"]).result
    assert (result["approved"], result["values"], result["edited"]) == (True, PROPOSAL, False)
    assert claims_of(result)["valuesDigest"] == values_digest(PROPOSAL)

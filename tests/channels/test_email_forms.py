"""The email decision page answers a breakpoint's form (issue 36): the fields prefilled
with the proposal, the edited values sent through the service (which validates them), its
problems shown on the fields, a rejection sending none."""

import pytest

from breakpoints.models import Breakpoint
from tests.support.email import link_path, parts, routed, send_all, text_links
from tests.support.forms import DEPLOY_FORM, DEPLOY_PROPOSAL

FORM, PROPOSAL = DEPLOY_FORM, DEPLOY_PROPOSAL


@pytest.fixture
def mailed_form(smtp, make_breakpoint, expert_member):
    """A routed breakpoint with a form and a proposal, mailed: (bp, links)."""
    bp, _ = routed(make_breakpoint, expert_member, form=FORM, proposal=PROPOSAL)
    send_all(bp)
    [message] = smtp.messages
    links = {verdict: link_path(url) for verdict, url in text_links(parts(message)[0]).items()}
    return bp, links


def test_the_page_shows_the_form_prefilled_with_the_proposal(client, mailed_form):
    _, links = mailed_form

    body = client.get(links["approve"]).content.decode()

    assert 'data-bpm-field="value__environment"' in body
    assert '<option value="prod" selected>prod</option>' in body
    assert 'name="value__replicas"' in body and 'value="3"' in body
    assert 'min="1"' in body and 'max="10"' in body
    assert 'name="value__notify"' in body and "checked" in body


def test_an_approval_with_edited_values_reaches_the_agent(client, mailed_form, agent_client):
    bp, links = mailed_form
    data = {"decision": "approve", "comment": "", "value__environment": "staging"}

    response = client.post(links["approve"], {**data, "value__replicas": "5"})

    assert response.status_code == 200, response.content.decode()
    result = agent_client.get(f"/api/breakpoints/{bp.pk}/status").json()["result"]
    assert result["approved"] is True
    assert result["values"] == {"environment": "staging", "replicas": 5, "notify": False}
    assert result["edited"] is True


def test_a_value_the_form_refuses_is_shown_and_decides_nothing(client, mailed_form):
    bp, links = mailed_form
    data = {"decision": "approve", "value__environment": "prod", "value__replicas": "11"}

    response = client.post(links["approve"], data)

    assert response.status_code == 400
    assert "less than or equal to 10" in response.content.decode()
    assert Breakpoint.objects.get(pk=bp.pk).status == "waiting"


def test_the_services_problem_lands_on_the_field(client, mailed_form):
    bp, links = mailed_form
    form = {**FORM, "properties": {**FORM["properties"], "replicas": {"type": "integer"}}}
    form["properties"]["replicas"]["multipleOf"] = 2  # checked by the service, not the page
    Breakpoint.objects.filter(pk=bp.pk).update(
        payload={**bp.payload, "form": form, "proposal": {"environment": "prod", "replicas": 4}}
    )
    data = {"decision": "approve", "value__environment": "prod", "value__replicas": "3"}

    response = client.post(links["approve"], data)

    body = response.content.decode()
    assert response.status_code == 400
    field = body[body.index('data-bpm-field="value__replicas"') :]
    assert "multiple of 2" in field[: field.index("</div>")]
    assert Breakpoint.objects.get(pk=bp.pk).status == "waiting"


def test_a_rejection_sends_no_values_even_with_fields_left_invalid(
    client, mailed_form, agent_client
):
    bp, links = mailed_form

    response = client.post(links["reject"], {"decision": "reject", "value__replicas": "x"})

    assert response.status_code == 200, response.content.decode()
    result = agent_client.get(f"/api/breakpoints/{bp.pk}/status").json()["result"]
    assert (result["approved"], result["values"]) == (False, None)

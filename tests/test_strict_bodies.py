"""Every write body is strict: an unknown key is a 400 naming it, never silently dropped.

The write operations are read from the OpenAPI schema (drf-spectacular's generator, the
schema /api/schema serves), so a new POST, PUT, PATCH or DELETE fails here until it refuses
an unknown key (`web.api.fields.StrictBody`; `NoBody` for one that takes no body) or is
listed in EXEMPT with the reason. Each is called as its caller would, with a body that is
valid but for one key it does not take: 400 `validation_error` naming that key; then the
same body without it succeeds, so the 400 was the key's. A body that is not a JSON object
is a 400 too.
"""

import json
from typing import Any

import pytest
from drf_spectacular.generators import SchemaGenerator

from breakpoints.models import Breakpoint
from policies.models import AutoApprovalRule
from tests.support.api import assert_error

WRITE_METHODS = ("post", "put", "patch", "delete")
UNKNOWN = "bogusKey"

# Operations whose body is not ours to shape, by operationId, with the reason.
EXEMPT = {
    # POST /api/events/{ref}: an external system's event (GitHub, GitLab, a CI script
    # signing with HMAC), verified by its sender's signature and stored as received; its
    # keys are the sender's, and a trigger rule's conditions read what they need of them.
    "events_create": "an external system's own event body",
}
# The inbound channels (/integrations/slack/interactions, /integrations/jira/webhook,
# /integrations/teams/messages, /decide/{token}) are not /api/ operations: Slack's, JIRA's
# and the Bot Framework's payloads and a mailed form are theirs, each verified by its channel.


def _write_operations() -> list[tuple[str, str, str]]:
    schema = SchemaGenerator().get_schema(request=None, public=True)
    return [
        (operation["operationId"], method.upper(), path)
        for path, item in schema["paths"].items()
        for method, operation in item.items()
        if method in WRITE_METHODS
    ]


OPERATIONS = _write_operations()
CHECKED = [op for op in OPERATIONS if op[0] not in EXEMPT]

# A valid body per operation ({} for one that takes none: expire, the DELETEs); an
# operation not listed here is sent {} (and must still refuse the unknown key).
VALID_BODIES: dict[str, Any] = {
    "breakpoints_create": {"payload": {"question": "Ship it?"}},
    "breakpoints_cancel_create": {"reason": "Not needed."},
    "breakpoints_feedback_create": {"comment": "Looks fine."},
    # 200 with the item's own 404: the batch itself is accepted.
    "breakpoints_decisions": {"items": [{"breakpointId": "bp-none-such", "approved": True}]},
    "event_sources_create": {"name": "strict-new", "kind": "github"},
    "event_sources_partial_update": {"enabled": False},
    "routes_create": {
        "name": "strict-new",
        "pattern": "strict.*",
        "channels": [{"kind": "jira", "project": "NEW"}],
    },
    "routes_update": {
        "name": "strict-route",
        "pattern": "other.*",
        "channels": [{"kind": "jira", "project": "OPS"}],
    },
    "rules_create": {"pattern": "strict.*", "action": "never-auto-approve", "note": ""},
    "rules_simulate": {"pattern": "strict.*", "since": "30d"},
    "triggers_create": {"name": "strict-new", "action": "forward"},
    "triggers_test_create": {"type": "push", "payload": {"ref": "main"}},
}
# Only an agent creates breakpoints; every other write is an admin's (or a reviewer's,
# which an admin is too).
AGENT_OPERATIONS = {"breakpoints_create"}


@pytest.fixture
def clients(admin_client, agent_client) -> dict[str, Any]:
    return {"admin": admin_client, "agent": agent_client}


@pytest.fixture
def objects(clients) -> dict[str, str]:
    """One of each object a path names, made through the API: {path parameter's owner: id}."""
    admin, agent = clients["admin"], clients["agent"]
    made = {
        "breakpoints": agent.post(
            "/api/breakpoints", {"payload": {"question": "?"}}, format="json"
        ),
        # In shadow mode, so that promoting it (rules/{id}/promote) succeeds once.
        "rules": admin.post("/api/rules", {"pattern": "kept.*", "mode": "shadow"}, format="json"),
        "routes": admin.post(
            "/api/routes",
            {
                "name": "strict-route",
                "pattern": "ops.*",
                "channels": [{"kind": "jira", "project": "OPS"}],
            },  # fmt: skip
            format="json",
        ),
        "event-sources": admin.post(
            "/api/event-sources", {"name": "strict-source", "kind": "github"}, format="json"
        ),
        "triggers": admin.post(
            "/api/triggers", {"name": "strict-trigger", "action": "forward"}, format="json"
        ),
    }
    for what, response in made.items():
        assert response.status_code == 201, (what, response.content)
    keyed = agent.post(
        "/api/breakpoints",
        {"payload": {"question": "?", "breakpointId": "strict.key"}},
        format="json",
    )
    granting = {"comment": "", "release": True, "grant": {"scope": "key", "uses": 1}}
    granted = admin.post(
        f"/api/breakpoints/{keyed.json()['breakpointId']}/feedback", granting, format="json"
    )
    assert granted.status_code == 201, granted.content
    return {
        "grants": granted.json()["grant"]["id"],
        "breakpoints": made["breakpoints"].json()["breakpointId"],
        "rules": made["rules"].json()["id"],
        "routes": str(made["routes"].json()["id"]),
        "event-sources": "strict-source",
        "triggers": "strict-trigger",
    }


def _url(path: str, objects: dict[str, str]) -> str:
    """The operation's path with its parameter filled with an existing object."""
    if "{" not in path:
        return path
    owner = path.removeprefix("/api/").split("/", 1)[0]
    assert owner in objects, f"no object for {path}: add one to the `objects` fixture"
    start, end = path.index("{"), path.index("}")
    return path[:start] + objects[owner] + path[end + 1 :]


def _call(clients, operation_id: str, method: str, url: str, body: Any):
    client = clients["agent" if operation_id in AGENT_OPERATIONS else "admin"]
    return client.generic(method, url, data=json.dumps(body), content_type="application/json")


@pytest.mark.parametrize(("operation_id", "method", "path"), CHECKED, ids=[c[0] for c in CHECKED])
def test_every_write_refuses_an_unknown_key(clients, objects, operation_id, method, path):
    url = _url(path, objects)
    body = VALID_BODIES.get(operation_id, {})

    refused = _call(clients, operation_id, method, url, {**body, UNKNOWN: 1})

    error = assert_error(refused, 400)
    messages = [message for value in error["details"].values() for message in value]
    assert any(UNKNOWN in message for message in messages), error
    accepted = _call(clients, operation_id, method, url, body)
    assert 200 <= accepted.status_code < 300, (operation_id, accepted.content)


@pytest.mark.parametrize("body", [[], ["a"], "text", 1, None], ids=repr)
@pytest.mark.parametrize(("operation_id", "method", "path"), CHECKED, ids=[c[0] for c in CHECKED])
def test_every_write_refuses_a_body_that_is_not_an_object(
    clients, objects, operation_id, method, path, body
):
    assert_error(_call(clients, operation_id, method, _url(path, objects), body), 400)


def test_the_exemptions_are_operations_that_exist():
    """A stale exemption would hide nothing, but say something false."""
    assert set(EXEMPT) <= {op[0] for op in OPERATIONS}


def test_the_schema_says_every_write_body_takes_no_other_key():
    """additionalProperties: false on each request body, so clients and fuzzers know too."""
    schema = SchemaGenerator().get_schema(request=None, public=True)
    components = schema["components"]["schemas"]
    for path, item in schema["paths"].items():
        for method, operation in item.items():
            if method not in WRITE_METHODS or operation["operationId"] in EXEMPT:
                continue
            for content in operation.get("requestBody", {}).get("content", {}).values():
                body = content["schema"]
                if "$ref" in body:
                    body = components[body["$ref"].rsplit("/", 1)[1]]
                assert body.get("additionalProperties") is False, (method, path)


def test_a_misspelt_rule_action_is_refused_not_an_auto_approve_rule(admin_client):
    """The issue's case: `acton` was dropped and the rule created as auto-approve."""
    response = admin_client.post(
        "/api/rules", {"pattern": "typo.*", "acton": "never-auto-approve"}, format="json"
    )

    error = assert_error(response, 400)
    assert "acton (did you mean action?)" in str(error["details"])
    assert not AutoApprovalRule.objects.exists()


def test_a_misspelt_cancel_reason_is_refused_and_nothing_is_cancelled(agent_client):
    created = agent_client.post("/api/breakpoints", {"payload": {"question": "?"}}, format="json")
    bp_id = created.json()["breakpointId"]

    response = agent_client.post(f"/api/breakpoints/{bp_id}/cancel", {"reson": "x"}, format="json")

    assert "reson (did you mean reason?)" in str(assert_error(response, 400)["details"])
    assert Breakpoint.objects.get(pk=bp_id).status == "waiting"

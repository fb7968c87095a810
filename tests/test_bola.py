"""The BOLA gate: every /api/ route and method in the URLconf answers each caller by contract.

The routes are read from the URLconf at test time (the DRF router's included), so a new
endpoint fails `test_every_api_route_has_an_access_rule` until ACCESS below says who may
call it. Each (route, method, caller) is then called with agent A's objects in the path:
another agent gets 404 exactly as for an id that does not exist, agents get 403 on
reviewer and admin endpoints, users with no role 403, missing/invalid/revoked tokens 401,
and nothing a refused caller sent changes the database, but for the one `refused` audit
event a decision service records of a person's refused decision (never of an agent's). The breakpoint GET routes are
also run through the ASGI application, whose status handler checks tokens on its own.
"""

from collections.abc import Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest
from django.core.cache import cache
from django.urls import URLPattern, URLResolver, get_resolver
from django.utils.regex_helper import normalize
from django.utils.timezone import now
from rest_framework.test import APIClient

from accounts.tokens import token_create_for_agent, token_create_for_user, token_revoke
from audit.models import Event
from breakpoints.models import Breakpoint, Feedback
from breakpoints.services import feedback_add_granting
from core.actors import Actor
from grants.models import Grant
from notifications.models import Delivery
from policies.autoapproval import rule_create
from policies.models import AutoApprovalRule, NotificationRoute
from policies.routes import route_add
from tests.conftest import bearer_client
from tests.support.aio import run_asgi
from tests.support.api import assert_error
from tests.support.factories import UserFactory
from tests.support.token_forms import well_formed_token
from triggers.models import EventSource, ExternalEvent, TriggerRule
from triggers.services import rule_add, source_add

OWNER = "owner"  # agent A, whose breakpoint X fills the path
OTHER_AGENT = "other_agent"  # agent B
REVIEWER = "reviewer"
ADMIN = "admin"
NO_ROLE = "no_role"  # a user with a personal token but no reviewer/admin role
ANONYMOUS = "anonymous"
INVALID_TOKEN = "invalid_token"
REVOKED_TOKEN = "revoked_token"  # agent A's, revoked
ROLES = (OWNER, OTHER_AGENT, REVIEWER, ADMIN, NO_ROLE, ANONYMOUS, INVALID_TOKEN, REVOKED_TOKEN)

ANY_METHOD = ("GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS")
ERROR_CODES = {401: "not_authenticated", 403: "permission_denied", 404: "not_found"}
MISSING_ID = "bp-does-not-exist"
MISSING = {
    "breakpoint": MISSING_ID,
    "rule": "rule-does-not-exist",
    "route": "999999",
    "source": "no-such-source",
    "trigger": "no-such-trigger",
    "event": "evt_does-not-exist",
    "grant": "grant-does-not-exist",
}
# The path parameter each fill goes into (the routers' lookups).
PARAMETER = {"source": "name", "trigger": "name", "event": "ref"}
SOURCE_BODY = {"name": "bola-probe-new", "kind": "github"}
TRIGGER_BODY = {"name": "bola-probe-new", "action": "forward"}
SAMPLE_EVENT = {"type": "push", "payload": {"ref": "main"}}
ROUTE_BODY = {"name": "bola-probe-new", "pattern": "bola.*", "channels": [{"kind": "jira", "project": "BOLA"}]}  # fmt: skip
PAYLOAD = {"question": "Approve the plan?", "title": "Plan Review"}
IDEMPOTENCY_KEY = "bola-create-key"


# --- the routes, from the URLconf ---------------------------------------------------


@dataclass(frozen=True)
class Route:
    key: str  # the URL name, or the regex of an unnamed pattern
    regex: str
    callback: Any

    @property
    def methods(self) -> tuple[str, ...]:
        """Every method the view answers (other than with 405)."""
        actions = getattr(self.callback, "actions", None)
        view_class = getattr(self.callback, "cls", None) or getattr(
            self.callback, "view_class", None
        )
        if actions:  # a DRF viewset route: its action map, plus DRF's HEAD and OPTIONS
            methods = {method.upper() for method in actions} | {"OPTIONS"}
        elif view_class is not None:
            initkwargs = getattr(self.callback, "view_initkwargs", {})
            names = initkwargs.get("http_method_names", view_class.http_method_names)
            methods = {m.upper() for m in names if hasattr(view_class, m)}
        else:  # a plain function view takes any method
            return ANY_METHOD
        if "GET" in methods:
            methods.add("HEAD")
        return tuple(m for m in ANY_METHOD if m in methods)

    def path(self, **params: str) -> str:
        [(template, names)] = normalize(self.regex)[:1]
        return "/" + template % {name: params[name] for name in names}


def _walk(patterns: list, prefix: str = "", shown: str = "") -> Iterator[Route]:
    for pattern in patterns:
        # path() patterns compile to "^...\\Z"; re_path() ones are written "^...$".
        regex = pattern.pattern.regex.pattern.removeprefix("^").removesuffix(r"\Z")
        if isinstance(pattern, URLResolver):
            yield from _walk(pattern.url_patterns, prefix + regex, shown + str(pattern.pattern))
        elif isinstance(pattern, URLPattern):
            key = pattern.name or shown + str(pattern.pattern).removeprefix("^")
            yield Route(key=key, regex=prefix + regex, callback=pattern.callback)


def api_routes() -> list[Route]:
    return [route for route in _walk(get_resolver().url_patterns) if route.regex.startswith("api/")]


# --- who may call what ----------------------------------------------------------------


def statuses(owner, other_agent, reviewer, admin, no_role=403, unauthenticated=401) -> dict:
    return {
        OWNER: owner,
        OTHER_AGENT: other_agent,
        REVIEWER: reviewer,
        ADMIN: admin,
        NO_ROLE: no_role,
        ANONYMOUS: unauthenticated,
        INVALID_TOKEN: unauthenticated,
        REVOKED_TOKEN: unauthenticated,
    }


Check = Callable[[str, Any, "World"], None]


@dataclass(frozen=True)
class Access:
    """What each caller gets from one method of a route, and how to call it."""

    expect: Mapping[str, int]
    body: dict[str, Any] | None = None
    query: str = ""  # formatted with the world's ids: "?id={breakpoint}"
    headers: Mapping[str, str] = field(default_factory=dict)
    check: Check | None = None  # more about a successful answer


@dataclass(frozen=True)
class RouteAccess:
    """One route: which of A's objects fill its path, and its methods' access.

    `gate` is what the view's permission check alone answers (OPTIONS; None: the view does
    not answer OPTIONS); HEAD answers as GET.
    """

    fill: str | None  # "breakpoint", "rule", "route", "source", "trigger", "event", "grant" or None
    gate: Mapping[str, int] | None
    methods: Mapping[str, Access]

    def access(self, method: str) -> Access | None:
        if method == "OPTIONS":
            return Access(expect=self.gate) if self.gate is not None else None
        if method == "HEAD" and "GET" in self.methods:
            return self.methods["GET"]
        return self.methods.get(method)


def _ids(response: Any) -> list[str]:
    return [row["breakpointId"] for row in response.json()["results"]]


def check_list(role: str, response: Any, world: "World") -> None:
    """Agents see their own rows only; reviewers and admins see everyone's."""
    ids = _ids(response)
    if role == OWNER:
        assert world.breakpoint_id in ids and world.their_breakpoint_id not in ids
    elif role == OTHER_AGENT:
        assert world.their_breakpoint_id in ids and world.breakpoint_id not in ids
    else:
        assert {world.breakpoint_id, world.their_breakpoint_id} <= set(ids)


def check_many_statuses(role: str, response: Any, world: "World") -> None:
    """A's id is reported not_found to B, exactly like an id that does not exist."""
    mine, theirs, missing = response.json()["results"]
    assert mine["breakpointId"] == world.breakpoint_id
    assert missing == {"breakpointId": MISSING_ID, "error": missing["error"]}
    assert missing["error"]["code"] == "not_found"
    if role == OTHER_AGENT:
        assert mine == {"breakpointId": world.breakpoint_id, "error": missing["error"]}
        assert theirs["status"] == "waiting"
    elif role == OWNER:
        assert mine["status"] == "waiting"
        assert theirs == {"breakpointId": world.their_breakpoint_id, "error": missing["error"]}
    else:
        assert mine["status"] == theirs["status"] == "waiting"


def check_is_x(role: str, response: Any, world: "World") -> None:
    assert response.json()["breakpointId"] == world.breakpoint_id


def check_events_of_x(role: str, response: Any, world: "World") -> None:
    assert response.json()["results"], "X has at least its creation event"


def check_create(role: str, response: Any, world: "World") -> None:
    """A's Idempotency-Key replays X for A only; B's same key makes B's own breakpoint."""
    body = response.json()
    if role == OWNER:
        assert body["breakpointId"] == world.breakpoint_id
    else:
        assert body["breakpointId"] != world.breakpoint_id
        assert body["agentId"] == "agent-b"


def check_batch_of_missing(role: str, response: Any, world: "World") -> None:
    [result] = response.json()["results"]
    assert (result["breakpointId"], result["status"]) == (MISSING_ID, 404)


def check_groups(role: str, response: Any, world: "World") -> None:
    """Reviewers count every agent's waiting breakpoints (A's and B's)."""
    assert sum(group["count"] for group in response.json()["results"]) >= 2


AGENT_OR_REVIEWER = statuses(200, 200, 200, 200)
REVIEWERS_ONLY = statuses(403, 403, 200, 200)
ADMINS_ONLY = statuses(403, 403, 403, 200)
OWNER_OR_REVIEWER_READS = statuses(200, 404, 200, 200)
PUBLIC = statuses(200, 200, 200, 200, no_role=200, unauthenticated=200)
NOWHERE = statuses(404, 404, 404, 404, no_role=404, unauthenticated=404)

ACCESS: dict[str, RouteAccess] = {
    "schema": RouteAccess(None, PUBLIC, {"GET": Access(PUBLIC)}),
    "api/schema/": RouteAccess(None, PUBLIC, {"GET": Access(PUBLIC)}),
    "docs": RouteAccess(None, None, {"GET": Access(PUBLIC)}),  # GET and HEAD only
    "api/docs/": RouteAccess(None, None, {"GET": Access(PUBLIC)}),
    "breakpoint-list": RouteAccess(
        None,
        AGENT_OR_REVIEWER,
        {
            "GET": Access(AGENT_OR_REVIEWER, check=check_list),
            "POST": Access(
                statuses(200, 201, 403, 403),
                body={"payload": PAYLOAD},
                headers={"Idempotency-Key": IDEMPOTENCY_KEY},
                check=check_create,
            ),
        },
    ),
    "breakpoint-poll-statuses": RouteAccess(
        None,
        AGENT_OR_REVIEWER,
        {
            "GET": Access(
                AGENT_OR_REVIEWER,
                query="?id={breakpoint}&id={their_breakpoint}&id=" + MISSING_ID,
                check=check_many_statuses,
            )
        },
    ),
    "breakpoint-detail": RouteAccess(
        "breakpoint", AGENT_OR_REVIEWER, {"GET": Access(OWNER_OR_REVIEWER_READS, check=check_is_x)}
    ),
    "breakpoint-poll-status": RouteAccess(
        "breakpoint", AGENT_OR_REVIEWER, {"GET": Access(OWNER_OR_REVIEWER_READS)}
    ),
    "breakpoint-events": RouteAccess(
        "breakpoint",
        AGENT_OR_REVIEWER,
        {"GET": Access(OWNER_OR_REVIEWER_READS, check=check_events_of_x)},
    ),
    "breakpoint-cancel": RouteAccess(
        "breakpoint",
        AGENT_OR_REVIEWER,
        {"POST": Access(statuses(200, 404, 403, 200), body={"reason": "BOLA probe"})},
    ),
    "breakpoint-feedback": RouteAccess(
        "breakpoint",
        REVIEWERS_ONLY,
        {
            "POST": Access(
                statuses(403, 403, 201, 201),
                body={"comment": "BOLA probe", "release": True, "approved": True},
            )
        },
    ),
    "breakpoint-expire": RouteAccess(
        "breakpoint", AGENT_OR_REVIEWER, {"POST": Access(ADMINS_ONLY, body={})}
    ),
    # A batch that names a breakpoint that does not exist: the reviewers' answer is 200 with
    # that item's 404; everyone else is refused the whole batch.
    "breakpoint-decisions": RouteAccess(
        None,
        REVIEWERS_ONLY,
        {
            "POST": Access(
                REVIEWERS_ONLY,
                body={"items": [{"breakpointId": MISSING_ID, "approved": True}]},
                check=check_batch_of_missing,
            )
        },
    ),
    "breakpoint-groups": RouteAccess(
        None, REVIEWERS_ONLY, {"GET": Access(REVIEWERS_ONLY, check=check_groups)}
    ),
    # The reviewer's grant: hers to read and revoke, and any admin's.
    "grant-list": RouteAccess(None, REVIEWERS_ONLY, {"GET": Access(REVIEWERS_ONLY)}),
    "grant-detail": RouteAccess(
        "grant",
        REVIEWERS_ONLY,
        {"GET": Access(REVIEWERS_ONLY), "DELETE": Access(REVIEWERS_ONLY)},
    ),
    "rule-list": RouteAccess(
        None,
        ADMINS_ONLY,
        {
            "GET": Access(ADMINS_ONLY),
            "POST": Access(statuses(403, 403, 403, 201), body={"pattern": "bola-probe-new.*"}),
        },
    ),
    "rule-evaluate": RouteAccess(
        None, ADMINS_ONLY, {"GET": Access(ADMINS_ONLY, query="?key=plan-review")}
    ),
    "rule-simulate": RouteAccess(
        None, ADMINS_ONLY, {"POST": Access(ADMINS_ONLY, body={"pattern": "plan-review"})}
    ),
    "rule-detail": RouteAccess(
        "rule",
        ADMINS_ONLY,
        {"GET": Access(ADMINS_ONLY), "DELETE": Access(statuses(403, 403, 403, 204))},
    ),
    "rule-promote": RouteAccess(
        "rule", ADMINS_ONLY, {"POST": Access(statuses(403, 403, 403, 200), body={})}
    ),
    "route-list": RouteAccess(
        None,
        ADMINS_ONLY,
        {
            "GET": Access(ADMINS_ONLY),
            "POST": Access(statuses(403, 403, 403, 201), body=ROUTE_BODY),
        },
    ),
    "route-detail": RouteAccess(
        "route",
        ADMINS_ONLY,
        {
            "GET": Access(ADMINS_ONLY),
            "PUT": Access(statuses(403, 403, 403, 200), body=ROUTE_BODY),
            "DELETE": Access(statuses(403, 403, 403, 204)),
        },
    ),
    "event-source-list": RouteAccess(
        None,
        ADMINS_ONLY,
        {
            "GET": Access(ADMINS_ONLY),
            "POST": Access(statuses(403, 403, 403, 201), body=SOURCE_BODY),
        },
    ),
    "event-source-detail": RouteAccess(
        "source",
        ADMINS_ONLY,
        {"GET": Access(ADMINS_ONLY), "PATCH": Access(ADMINS_ONLY, body={"enabled": True})},
    ),
    "trigger-list": RouteAccess(
        None,
        ADMINS_ONLY,
        {
            "GET": Access(ADMINS_ONLY),
            "POST": Access(statuses(403, 403, 403, 201), body=TRIGGER_BODY),
        },
    ),
    "trigger-detail": RouteAccess(
        "trigger",
        ADMINS_ONLY,
        {"GET": Access(ADMINS_ONLY), "DELETE": Access(statuses(403, 403, 403, 204))},
    ),
    "trigger-test": RouteAccess(
        "trigger", ADMINS_ONLY, {"POST": Access(ADMINS_ONLY, body=SAMPLE_EVENT)}
    ),
    "event-list": RouteAccess(None, ADMINS_ONLY, {"GET": Access(ADMINS_ONLY)}),
    # GET reads an event by id (admins); POST receives an event for the source of that name:
    # the signature is the credential, whatever token comes with it, and an event id names
    # no source (404 to everyone, nothing stored).
    "event-ingest": RouteAccess(
        "event",
        ADMINS_ONLY,
        {
            "GET": Access(ADMINS_ONLY),
            "POST": Access(
                statuses(404, 404, 404, 404, no_role=404, unauthenticated=404),
                body={"type": "probe"},
            ),
        },
    ),
    # The catch-all: an unknown /api/ path is the 404 envelope, whoever asks, with any method.
    "api/": RouteAccess(None, NOWHERE, {method: Access(NOWHERE) for method in ANY_METHOD}),
}

PUBLIC_ROUTES = ("schema", "api/schema/", "docs", "api/docs/")


def _case(route_key: str, method: str, role: str) -> Any:
    return pytest.param(route_key, method, role, id=f"{route_key}-{method}-{role}")


ROUTES = {route.key: route for route in api_routes()}
CASES = [
    _case(route.key, method, role)
    for route in ROUTES.values()
    for method in route.methods
    for role in ROLES
]


def test_every_api_route_has_an_access_rule():
    """A new /api/ route or method cannot ship without a line in ACCESS (and none is stale)."""
    enumerated = {(route.key, method) for route in ROUTES.values() for method in route.methods}
    ruled = {
        (key, method)
        for key, rule in ACCESS.items()
        for method in ANY_METHOD
        if key in ROUTES and rule.access(method) is not None
    }
    assert len(ROUTES) == len(api_routes()), "two /api/ routes share a name"
    assert enumerated - ruled == set(), "routes without an access rule in tests/test_bola.py"
    assert set(ACCESS) - set(ROUTES) == set(), "rules for routes that no longer exist"
    # Every (route, method) the URLconf answers must be one ACCESS decides, and vice versa.
    assert ruled - enumerated == set(), "rules for methods the view does not answer"
    assert ("breakpoint-detail", "GET") in enumerated  # the walk reaches the router's routes


# --- the world: A's objects, and one client per role ---------------------------------


@dataclass
class World:
    breakpoint_id: str  # X, agent A's
    their_breakpoint_id: str  # agent B's
    rule_id: str
    route_id: str
    source_name: str
    trigger_name: str
    event_id: str
    grant_id: str
    tokens: dict[str, str | None]  # raw token per role (None: no Authorization header)

    def params(self, fill: str | None, *, missing: bool = False) -> dict[str, str]:
        if fill is None:
            return {}
        ids = {
            "breakpoint": self.breakpoint_id,
            "rule": self.rule_id,
            "route": self.route_id,
            "source": self.source_name,
            "trigger": self.trigger_name,
            "event": self.event_id,
            "grant": self.grant_id,
        }
        return {PARAMETER.get(fill, "pk"): MISSING[fill] if missing else ids[fill]}

    def query(self, template: str) -> str:
        return template.format(
            breakpoint=self.breakpoint_id, their_breakpoint=self.their_breakpoint_id
        )

    def client(self, role: str) -> APIClient:
        token = self.tokens[role]
        return bearer_client(token) if token is not None else APIClient()


@pytest.fixture(autouse=True)
def _fresh_rate_limits():
    """The matrix sends hundreds of requests from one address, many with bad tokens: rate
    counters kept in the cache from earlier tests must not turn an expected 401 into 429."""
    cache.clear()
    yield
    cache.clear()


@pytest.fixture
def world(make_breakpoint, agent_token, reviewer, admin_user) -> World:
    x = make_breakpoint(payload=PAYLOAD, idempotency_key=IDEMPOTENCY_KEY)
    theirs = make_breakpoint(agent_id="agent-b", payload={"question": "Theirs?", "title": "B"})
    # In shadow mode: an admin's promotion of it succeeds (once).
    rule = rule_create(
        actor=Actor.for_user(admin_user), pattern="bola-probe.*", note="probe", mode="shadow"
    )
    route = route_add(
        actor=Actor.for_user(admin_user),
        name="bola-probe",
        pattern="bola-probe.*",
        channels=[{"kind": "jira", "project": "BOLA"}],
    )
    admin = Actor.for_user(admin_user)
    source = source_add(actor=admin, name="bola-probe", kind="github")
    trigger = rule_add(actor=admin, name="bola-probe", action="forward", source="bola-probe")
    event = ExternalEvent.objects.create(
        source=source, type="push", delivery_id="bola-1", payload={}, next_attempt_at=now()
    )
    granting = make_breakpoint(payload={"question": "Again?", "breakpointId": "bola.grant"})
    _, _, grant = feedback_add_granting(
        breakpoint_id=granting.pk,
        actor=Actor.for_user(reviewer),
        comment="",
        release=True,
        grant={"scope": "key", "uses": 1},
    )
    revoked = token_create_for_agent(agent_id="agent-a")[1]
    token_revoke(prefix_or_id=revoked)
    return World(
        breakpoint_id=x.pk,
        their_breakpoint_id=theirs.pk,
        rule_id=str(rule.pk),
        route_id=str(route.pk),
        source_name=source.name,
        trigger_name=trigger.name,
        event_id=event.pk,
        grant_id=grant.pk,
        tokens={
            OWNER: agent_token,
            OTHER_AGENT: token_create_for_agent(agent_id="agent-b")[1],
            REVIEWER: token_create_for_user(user=reviewer)[1],
            ADMIN: token_create_for_user(user=admin_user)[1],
            NO_ROLE: token_create_for_user(user=UserFactory(username="nobody"))[1],
            ANONYMOUS: None,
            INVALID_TOKEN: well_formed_token(),
            REVOKED_TOKEN: revoked,
        },
    )


def snapshot() -> dict[str, Any]:
    """Everything a write could change: the breakpoint rows, their events and feedback,
    rules and routes."""
    return {
        "breakpoints": list(Breakpoint.objects.order_by("pk").values()),
        "events": list(
            Event.objects.exclude(type="refused").order_by("pk").values_list("pk", flat=True)
        ),
        "feedback": list(Feedback.objects.order_by("pk").values_list("pk", flat=True)),
        "rules": list(AutoApprovalRule.objects.order_by("pk").values()),
        "routes": list(NotificationRoute.objects.order_by("pk").values()),
        "sources": list(EventSource.objects.order_by("pk").values()),
        "triggers": list(TriggerRule.objects.order_by("pk").values()),
        "external_events": list(ExternalEvent.objects.order_by("pk").values_list("pk", flat=True)),
        "deliveries": Delivery.objects.count(),
        "grants": list(Grant.objects.order_by("pk").values()),
    }


PEOPLE = (REVIEWER, ADMIN, NO_ROLE)  # whose refused decisions the services record


def refused_ids() -> set[int]:
    return set(Event.objects.filter(type="refused").values_list("pk", flat=True))


def send(client: APIClient, method: str, path: str, access: Access) -> Any:
    headers = {f"HTTP_{name.upper().replace('-', '_')}": v for name, v in access.headers.items()}
    call = getattr(client, method.lower())
    if access.body is not None and method not in ("GET", "HEAD"):
        return call(path, access.body, format="json", **headers)
    return call(path, **headers)


def assert_refused(response: Any, status: int, method: str) -> None:
    """The refusal carries the envelope with the status's code (HEAD has no body to hold it)."""
    if method == "HEAD":
        return
    assert_error(response, status, ERROR_CODES[status])
    if status == 401:
        assert response.headers["WWW-Authenticate"].startswith("Bearer")


def error_code(response: Any) -> str | None:
    if response.status_code < 400 or not response.content:
        return None
    return response.json()["error"]["code"]


# --- the matrix ---------------------------------------------------------------------------


@pytest.mark.parametrize(("route_key", "method", "role"), CASES)
def test_each_caller_gets_what_the_contract_says(route_key, method, role, world):
    route = ROUTES[route_key]
    rule = ACCESS.get(route_key)
    access = rule.access(method) if rule else None
    if rule is None or access is None:
        pytest.fail(f"{method} {route.regex} has no access rule in ACCESS")
    expected = access.expect[role]
    path = route.path(**world.params(rule.fill)) + world.query(access.query)
    before, refused_before = snapshot(), refused_ids()

    response = send(world.client(role), method, path, access)

    assert response.status_code == expected, (method, path, role, response.content[:300])
    if expected >= 400:
        assert_refused(response, expected, method)
        assert snapshot() == before, "a refused request changed the database"
        recorded = refused_ids() - refused_before
        assert len(recorded) <= (1 if role in PEOPLE and method == "POST" else 0), recorded
    elif access.check is not None and method in ("GET", "POST"):
        access.check(role, response, world)


@pytest.mark.parametrize(
    ("route_key", "method"),
    [
        pytest.param(route.key, method, id=f"{route.key}-{method}")
        for route in ROUTES.values()
        if ACCESS.get(route.key) and ACCESS[route.key].fill == "breakpoint"
        for method in route.methods
    ],
)
def test_another_agent_cannot_tell_a_breakpoint_exists(route_key, method, world):
    """B's answer for A's breakpoint is the answer for an id that does not exist."""
    route, rule = ROUTES[route_key], ACCESS[route_key]
    access = rule.access(method)
    assert access is not None
    client = world.client(OTHER_AGENT)

    on_x = send(client, method, route.path(**world.params("breakpoint")), access)
    on_missing = send(
        client, method, route.path(**world.params("breakpoint", missing=True)), access
    )

    assert on_x.status_code == on_missing.status_code
    assert on_x.status_code not in (200, 201, 204) or method == "OPTIONS"
    assert error_code(on_x) == error_code(on_missing)


def test_another_agent_cannot_create_for_the_owner(world):
    """B cannot post a breakpoint under agent A's id."""
    before = snapshot()

    response = world.client(OTHER_AGENT).post(
        "/api/breakpoints", {"agentId": "agent-a", "payload": PAYLOAD}, format="json"
    )

    assert response.status_code == 403
    assert response.json()["error"]["code"] == "permission_denied"
    assert snapshot() == before


# --- the same through the ASGI application (the status paths' own handler) ------------

ASGI_CASES = [
    pytest.param(route.key, role, id=f"{route.key}-{role}")
    for route in ROUTES.values()
    if route.key.startswith("breakpoint-") and "GET" in route.methods
    for role in ROLES
]


def run(scenario: Callable[[httpx.AsyncClient], Awaitable[Any]]) -> Any:
    return run_asgi(scenario)


@pytest.fixture
def _testserver_allowed(settings):
    settings.ALLOWED_HOSTS = [*settings.ALLOWED_HOSTS, "testserver"]


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("_testserver_allowed")
@pytest.mark.parametrize(("route_key", "role"), ASGI_CASES)
def test_the_asgi_application_answers_the_same(route_key, role, world):
    """config.asgi serves /status itself with Bearer tokens: the same contract holds there."""
    route, rule = ROUTES[route_key], ACCESS[route_key]
    access = rule.access("GET")
    assert access is not None
    token = world.tokens[role]
    headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
    path = route.path(**world.params(rule.fill)) + world.query(access.query)
    missing_path = route.path(**world.params(rule.fill, missing=True)) + world.query(access.query)
    before = snapshot()

    on_x, on_missing = run(
        lambda client: _both(client, path, missing_path, headers),
    )

    assert on_x.status_code == access.expect[role], (path, role, on_x.text[:300])
    if on_x.status_code >= 400:
        assert_refused(on_x, on_x.status_code, "GET")
    elif access.check is not None:
        access.check(role, on_x, world)
    if role == OTHER_AGENT and rule.fill == "breakpoint":
        assert on_missing.status_code == on_x.status_code == 404
        assert error_code(on_missing) == error_code(on_x) == "not_found"
    assert snapshot() == before


async def _both(client: httpx.AsyncClient, path: str, other: str, headers: dict) -> tuple:
    return await client.get(path, headers=headers), await client.get(other, headers=headers)

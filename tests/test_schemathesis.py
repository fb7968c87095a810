"""The CI fuzzing gate: schemathesis over the whole served schema, as an agent, a reviewer, an admin.

Every operation of `/api/schema` is called in-process through the WSGI app with generated
inputs, valid and invalid, and every check schemathesis has runs on each answer: no 5xx,
every status, content type, header and body as the schema declares, invalid input
refused, valid input accepted, missing or wrong credentials refused, unsupported methods
405. A failure prints the request as a curl command.
"""

import os
import re
import zlib
from urllib.parse import parse_qs, urlsplit

import pytest
import schemathesis
from django.core.wsgi import get_wsgi_application
from django.test.utils import override_settings
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rest_framework.test import APIClient
from schemathesis import GenerationMode
from schemathesis.specs.openapi.checks import negative_data_rejection, positive_data_acceptance

from accounts.tokens import token_create_for_agent, token_create_for_user
from breakpoints.payload import form_schema
from breakpoints.services import breakpoint_create, feedback_add
from core.actors import Actor
from policies import autoapproval
from tests.support.factories import AdminFactory, ReviewerFactory
from triggers.models import EventSource

# Not config.wsgi: importing it runs the production startup checks (ALLOWED_HOSTS, broker).
application = get_wsgi_application()
# No JSON Schema says which strings JMESPath parses: the formats the schema names for
# trigger conditions and templates draw valid ones.
schemathesis.openapi.format("jmespath", st.sampled_from(["a", "a.b == 'x'", "!a || b[0]"]))
schemathesis.openapi.format("jmespath-template", st.sampled_from(["", "x", "CI {{ a.b }}"]))
# A trigger rule may name an event source: valid only if it exists (the fixture's).
KNOWN_SOURCE = "fuzz-source"
# schemathesis calls the app as http://localhost.
HOSTS = ["localhost", "testserver"]

with override_settings(ALLOWED_HOSTS=HOSTS):
    schema = schemathesis.openapi.from_wsgi("/api/schema?format=json", application)
# The test sends each role's token itself; a generated Authorization header would be replaced.
schema.config.generation.update(with_security_parameters=False)

# Examples per operation and role; 14 operations x 3 roles keep the whole file near a minute.
# A deeper, random search: BPM_FUZZ_EXAMPLES=500 BPM_FUZZ_RANDOM=1.
MAX_EXAMPLES = int(os.environ.get("BPM_FUZZ_EXAMPLES", "20"))
DERANDOMIZE = os.environ.get("BPM_FUZZ_RANDOM", "") != "1"
# Real ids (filled by the fixture), so that generated calls reach existing breakpoints
# and rules too, not only 404s.
KNOWN_IDS: dict[str, list[str]] = {"breakpoints": [], "rules": []}
KNOWN_CURSORS: list[str] = []
OPTIONS = ["Go", "Hold"]
_WAIT = re.compile(r"^[0-9]{1,4}$")  # as breakpoints.waiting.query reads it


@pytest.fixture
def tokens(transactional_db, settings) -> dict[str, str]:
    """Tokens of each role and a few breakpoints in several states, committed (the app's own
    connections must see them)."""
    settings.ALLOWED_HOSTS = HOSTS
    # Hundreds of calls per token within a minute: no request rate here (tested elsewhere).
    settings.BPM_THROTTLE_TOKEN_RATE = "off"
    settings.BPM_THROTTLE_ANON_RATE = "off"
    # The auth checks send hundreds of bad tokens from one address.
    settings.BPM_AUTH_FAILURES_PER_MINUTE = 1_000_000
    reviewer = ReviewerFactory(username="fuzz-reviewer")
    admin = AdminFactory(username="fuzz-admin")
    agent = Actor.for_agent("agent-fuzz")
    ids = []
    for n in range(3):
        bp, _ = breakpoint_create(
            actor=agent,
            payload={"question": f"Deploy {n}?", "title": f"Deploy {n}", "options": OPTIONS},
            tags=["deploy"],
        )
        ids.append(bp.pk)
    feedback_add(
        breakpoint_id=ids[0],
        actor=Actor.for_user(reviewer),
        comment="Go ahead",
        release=True,
        approved=True,
        option=None,
    )
    other, _ = breakpoint_create(actor=Actor.for_agent("agent-other"), payload={"question": "?"})
    ids.append(other.pk)
    KNOWN_IDS["breakpoints"] = ids
    rule = autoapproval.rule_create(
        actor=Actor.for_user(admin), pattern="never.*", action="never-auto-approve", note=""
    )
    KNOWN_IDS["rules"] = [rule.pk]
    EventSource.objects.create(name=KNOWN_SOURCE, kind="github")
    raw = {
        "agent": token_create_for_agent(agent_id="agent-fuzz")[1],
        "reviewer": token_create_for_user(user=reviewer)[1],
        "admin": token_create_for_user(user=admin)[1],
    }
    # A cursor is opaque: valid ones come from a page's next/previous links only.
    client = APIClient(HTTP_AUTHORIZATION=f"Bearer {raw['reviewer']}", SERVER_NAME="localhost")
    next_page = client.get("/api/breakpoints", {"pageSize": 1}).json()["next"]
    KNOWN_CURSORS[:] = parse_qs(urlsplit(next_page).query)["cursor"]
    return raw


def _use_known_id(case) -> None:
    """Point about half of the valid cases of a detail path at an existing object."""
    params = case.path_parameters
    if not params or "id" not in params or not _is_positive(case):
        return
    pool = KNOWN_IDS["rules" if case.path.startswith("/api/rules") else "breakpoints"]
    # A stable choice (not hash(): it changes per process), so a seed replays the same run.
    pick = zlib.crc32(str(params["id"]).encode("utf-8", "surrogatepass"))
    if pool and pick % 2 == 0:
        params["id"] = pool[pick % len(pool)]
        body = case.body
        if case.path.endswith("/feedback") and isinstance(body, dict) and body.get("option"):
            # The breakpoints offer options: a valid choice is one of them.
            body["option"] = OPTIONS[pick % len(OPTIONS)]


def _is_positive(case) -> bool:
    return case.meta is None or case.meta.generation.mode == GenerationMode.POSITIVE


def _use_known_source(case) -> None:
    """A valid trigger rule names an event source that exists."""
    body = case.body
    if _is_positive(case) and case.path == "/api/triggers" and isinstance(body, dict):
        if body.get("source"):
            body["source"] = KNOWN_SOURCE


def _use_known_cursor(case) -> None:
    """A valid list request can only carry a cursor that the server handed out."""
    if _is_positive(case) and case.query and "cursor" in case.query:
        case.query["cursor"] = KNOWN_CURSORS[0]


# Rules between fields that the schema says only in words (generators cannot express them
# as unions): a valid case is made to keep them; an invalid one is left to the server.
ESCALATE_TO = "ops-lead"
SELECTOR = {"runId": "run-1"}
TRIGGER_PARAMS = {
    "release": ({"selector", "approved", "feedback"}, {"selector": SELECTOR}),
    "cancel": ({"selector", "reason"}, {"selector": SELECTOR}),
    "create": (
        {"question", "title", "expert", "breakpointId", "agentId", "runId", "tags", "ttlSeconds"},
        {"question": "Deploy?"},
    ),
    "forward": (set(), {}),
}


def _keep_rules_in_words(case) -> None:
    body = case.body if isinstance(case.body, dict) else {}
    if not _is_positive(case):
        return
    if case.path.endswith("/feedback") and not (body.get("comment") or "").strip():
        body["release"] = True  # a comment may be blank only with release: true
    if case.path == "/api/breakpoints" and isinstance(body.get("requestedBy"), str):
        # It must name a person with an account (accounts.requesters): the schema can only
        # say it is a short string.
        body["requestedBy"] = "fuzz-reviewer"
    if case.path == "/api/breakpoints" and body.get("requestedBy") is None:
        # Under four eyes (its payload's, or a route's default a fuzzed route set) a
        # breakpoint must name its requester (policies.foureyes): the token has no owner.
        body["requestedBy"] = "fuzz-reviewer"
    if case.path == "/api/breakpoints" and isinstance(body.get("payload"), dict):
        _keep_escalation_rule(body["payload"])
        _keep_option_labels_unique(body["payload"])
        if body["payload"].get("autoApproveAfterN") == 0:
            body["payload"]["autoApproveAfterN"] = 1
        if body["payload"].get("autoApproveAfterN") is not None:
            # It counts decisions per key: the question must be named (breakpoints.payload.validation).
            body["payload"]["breakpointId"] = "fuzz.named-question"
    if case.path == "/api/rules" and body.get("mode") == "shadow":
        body["action"] = "auto-approve"  # only an auto-approve rule has a shadow mode
    if case.path.startswith("/api/routes") and isinstance(body.get("defaults"), dict):
        _keep_escalation_rule(body["defaults"])
    if case.path == "/api/triggers" and body.get("action") in TRIGGER_PARAMS:
        _keep_trigger_params(body)
    if case.path == "/api/rules/simulate":
        if not isinstance(case.body, dict):  # no body: no pattern either
            case.body = body
        _keep_replay_rules(body)
    if case.path == "/api/rules/evaluate" and case.query:
        if str(case.query.get("autoApproveAfterN")) == "0":
            case.query["autoApproveAfterN"] = 1


def _keep_option_labels_unique(payload: dict) -> None:
    """An option given as {label} may not repeat another option's label
    (breakpoints.payload.validation): no JSON Schema says uniqueness by a member."""
    options = payload.get("options")
    if not isinstance(options, list):
        return
    seen: set[str] = set()
    kept = []
    for option in options:
        label = option.get("label") if isinstance(option, dict) else option
        if isinstance(label, str):
            if label in seen:
                continue
            seen.add(label)
        kept.append(option)
    payload["options"] = kept


def _keep_replay_rules(body: dict) -> None:
    """A pattern for a rule's action; key and n, and no pattern, for autoApproveAfterN; a
    window that parses, not in the future, at most ten years back (policies.replay)."""
    if body.get("action") == "autoApproveAfterN":
        body.pop("pattern", None)
        body.setdefault("key", "fuzz.named-question")
        body.setdefault("n", 2)
    else:
        body.pop("key", None)
        body.pop("n", None)
        body.setdefault("pattern", "fuzz.*")
    if "since" in body:
        body["since"] = "30d"


def _keep_escalation_rule(settings: dict) -> None:
    """escalateTo is a name whenever escalateAfterSeconds is set or onTimeout escalates;
    onTimeout is not approve under four eyes (policies.foureyes)."""
    if settings.get("preventSelfReview") is True and settings.get("onTimeout") == "approve":
        settings["onTimeout"] = "reject"
    escalates = settings.get("escalateAfterSeconds") is not None
    if escalates or settings.get("onTimeout") == "escalate":
        if not isinstance(settings.get("escalateTo"), str):
            settings["escalateTo"] = ESCALATE_TO


def _keep_trigger_params(body: dict) -> None:
    """An action takes its own params only, with the required ones; a selector names one."""
    allowed, required = TRIGGER_PARAMS[body["action"]]
    params = body.get("params") or {}
    params = {key: value for key, value in params.items() if key in allowed}
    selector = params.get("selector")
    if isinstance(selector, dict) and not any(selector.values()):
        params["selector"] = SELECTOR
    params = {**required, **params}
    if params or "params" in body:
        body["params"] = params


def _no_long_wait(case) -> None:
    """`?wait=N` holds the answer up to N seconds: a valid wait becomes 0 (still valid), so
    runs stay fast; an invalid one is left for the server to refuse."""
    if case.query and "wait" in case.query:
        value = case.query["wait"]
        if isinstance(value, list):
            case.query["wait"] = [_zero_if_wait(item) for item in value]
        else:
            case.query["wait"] = _zero_if_wait(value)


def _zero_if_wait(value):
    seconds = value.strip() if isinstance(value, str) else value
    if isinstance(seconds, str) and _WAIT.match(seconds):
        seconds = int(seconds)
    if isinstance(seconds, int) and not isinstance(seconds, bool) and 0 < seconds <= 60:
        return "0" if isinstance(value, str) else 0
    return value


@pytest.mark.parametrize("role", ["agent", "reviewer", "admin"])
@schema.parametrize()
@settings(
    max_examples=MAX_EXAMPLES,
    deadline=None,
    suppress_health_check=list(HealthCheck),
    derandomize=DERANDOMIZE,
)
def test_api_conforms_to_its_schema(case, role, tokens):
    _no_long_wait(case)
    _use_known_id(case)
    _use_known_cursor(case)
    _use_known_source(case)
    _keep_rules_in_words(case)
    excluded = []
    if case.method == "POST" and case.path.startswith("/api/events/"):
        # An event is accepted only with its source's signature over the exact body, which
        # no schema can state: generated ones are all refused (401/404/415), and every
        # other check still runs (above all: no 5xx). tests/triggers covers acceptance.
        excluded.append(positive_data_acceptance)
    if case.method == "GET" and case.path == "/api/rules/evaluate":
        # Its repeatable query parameters (tag, expert: arrays, explode) are one value on the
        # wire whether schemathesis made them an array or a lone string; it then counts as
        # "schema-violating" a request the server rightly reads as a one-item array.
        excluded.append(negative_data_rejection)
    if case.method == "POST" and case.path == "/api/breakpoints" and _has_form(case):
        # payload.form is the agent's own JSON Schema and payload.proposal its values: which
        # schemas are forms (type object, no remote $ref, patterns RE2 accepts, within the
        # size and expansion limits) and which numbers a proposal may hold (within 2^53) no
        # OpenAPI 3.0 schema can state. Such a request stays under every other check (above
        # all: no 5xx); the form fuzzing below and tests/breakpoints cover acceptance.
        excluded.append(positive_data_acceptance)
    if (
        case.method == "POST"
        and case.path.endswith("/feedback")
        and _has_any(case, ("values", "grant"))
    ):
        # Whether a decision takes values (the breakpoint has a form) or a grant (its key is
        # its own, it has a runId, it is not under four eyes) depends on the breakpoint, not
        # on the body: no schema states it. Under every other check still;
        # tests/breakpoints and tests/grants cover acceptance.
        excluded.append(positive_data_acceptance)
    if _has_nul(case):
        # NUL cannot be stored (PostgreSQL text): every string of the API refuses it with 400,
        # a rule the schema cannot state for a free-form payload. Such a request stays under
        # every other check (above all: no 5xx).
        excluded.append(positive_data_acceptance)
    case.call_and_validate(
        headers={"Authorization": f"Bearer {tokens[role]}"}, excluded_checks=excluded
    )


def _has_any(case, keys: tuple[str, ...]) -> bool:
    body = case.body if isinstance(case.body, dict) else {}
    return any(body.get(key) is not None for key in keys)


def _has_form(case) -> bool:
    payload = case.body.get("payload") if isinstance(case.body, dict) else None
    return isinstance(payload, dict) and any(
        payload.get(part) is not None for part in ("form", "proposal")
    )


def _has_nul(case) -> bool:
    return any(_contains_nul(part) for part in (case.body, case.query, case.path_parameters))


def _contains_nul(value) -> bool:
    if isinstance(value, str):
        return "\x00" in value
    if isinstance(value, dict):
        return any(_contains_nul(k) or _contains_nul(v) for k, v in value.items())
    if isinstance(value, list | tuple):
        return any(_contains_nul(item) for item in value)
    return False


METHODS = ("get", "post", "put", "patch", "delete")


def test_every_path_answers_an_undeclared_method_with_405_and_allow(tokens):
    """The envelope's method_not_allowed, and Allow naming the methods the schema declares."""
    client = APIClient(HTTP_AUTHORIZATION=f"Bearer {tokens['admin']}", SERVER_NAME="localhost")
    for path, item in schema.raw_schema["paths"].items():
        declared = {method for method in item if method in METHODS}
        url = path.replace("{id}", KNOWN_IDS["rules" if "/rules" in path else "breakpoints"][0])
        for method in set(METHODS) - declared:
            response = getattr(client, method)(url)

            assert response.status_code == 405, (method, path)
            assert response.json()["error"]["code"] == "method_not_allowed"
            allowed = {m.strip().lower() for m in response["Allow"].split(",")}
            assert declared <= allowed, (method, path, allowed)


def test_every_body_is_refused_with_415_unless_json(tokens):
    client = APIClient(HTTP_AUTHORIZATION=f"Bearer {tokens['admin']}", SERVER_NAME="localhost")
    for path, item in schema.raw_schema["paths"].items():
        for method, operation in item.items():
            if method not in METHODS or "requestBody" not in operation:
                continue
            url = path.replace("{id}", KNOWN_IDS["breakpoints"][1])

            response = getattr(client, method)(url, data="<x/>", content_type="application/xml")

            assert response.status_code == 415, (method, path)
            assert response.json()["error"]["code"] == "unsupported_media_type"
            assert "415" in operation["responses"], (method, path)


def test_evaluate_refuses_a_threshold_past_any_integer_column(tokens):
    """Found by this gate: autoApproveAfterN=678058048999108478569365372928 was a 500."""
    client = APIClient(HTTP_AUTHORIZATION=f"Bearer {tokens['admin']}", SERVER_NAME="localhost")

    response = client.get("/api/rules/evaluate", {"key": "a", "autoApproveAfterN": str(10**30)})

    assert response.status_code == 400
    assert "autoApproveAfterN" in response.json()["error"]["details"]


# --- forms: generated patterns and $ref graphs against the validation budget (issue 47) ---
# An agent's form is code the service runs. Patterns from a small regular grammar (bounded
# and unbounded repeats, nesting, alternatives, and now and then what RE2 refuses) and
# random $ref/allOf/anyOf/oneOf graphs over nested proposals are posted through the API:
# each answers 201 or 400 (never a 5xx), and no check spends more than its budget.
FORM_EXAMPLES = int(os.environ.get("BPM_FUZZ_FORM_EXAMPLES", "60"))
_ATOMS = st.sampled_from(["a", "b", ".", "[ab]", "[^a]", r"\d", r"\w", r"\n", "(?=a)", r"\1"])
_REPEATS = st.sampled_from(["", "*", "+", "?", "{0,99}", "{2}", "{1,}", "{3,40}", "*?"])


def _repeated(parts: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    return st.tuples(parts, _REPEATS).map("".join)


_PATTERNS = st.recursive(
    _repeated(_ATOMS),
    lambda inner: st.one_of(
        st.lists(inner, min_size=1, max_size=6).map("".join),
        _repeated(st.lists(inner, min_size=1, max_size=3).map(lambda p: f"({''.join(p)})")),
        st.lists(inner, min_size=2, max_size=3).map(lambda p: f"(?:{'|'.join(p)})"),
    ),
    max_leaves=12,
).map(lambda body: f"^{body}$")
_TEXTS = st.tuples(
    st.integers(0, 120), st.sampled_from(["", "b", "\n", "ab", "1"]), st.text("ab1", max_size=8)
).map(lambda t: "a" * t[0] + t[1] + t[2])


def _ref_graph(draw_defs: list[tuple[str, int, str]], in_place: bool) -> dict:
    """$defs d0..dn: each an object whose field c applies `count` refs with `keyword` (or,
    `in_place`, applies them to the object itself) to the def they name."""
    defs = {}
    for index, (keyword, count, target) in enumerate(draw_defs):
        refs = [{"$ref": f"#/$defs/d{target}"}] * count
        applied = {keyword: refs} if keyword != "$ref" else refs[0]
        node: dict = {"type": "object", "properties": {"s": {"type": "string"}}}
        if in_place and index:
            node.update(applied)
        else:
            node["properties"]["c"] = applied
        defs[f"d{index}"] = node
    return {"type": "object", "$defs": defs, "$ref": "#/$defs/d0"}


@st.composite
def _ref_graphs(draw) -> dict:
    size = draw(st.integers(1, 4))
    defs = [
        (
            draw(st.sampled_from(["allOf", "anyOf", "oneOf", "$ref"])),
            draw(st.integers(1, 4)),
            str(draw(st.integers(0, size - 1))),
        )
        for _ in range(size)
    ]
    return _ref_graph(defs, in_place=draw(st.booleans()))


def _nested(depth: int, text: str) -> dict:
    value: dict = {"s": text}
    for _ in range(depth - 1):
        value = {"c": value, "s": text}
    return value


def _post_form(client: APIClient, form: dict, proposal: dict) -> None:
    """Create with `form` and `proposal`: 201, or a 400 in the envelope; within budget."""
    body = {"payload": {"question": "Fuzz?", "form": form, "proposal": proposal}}
    with form_schema.budgets_recorded() as budgets:
        response = client.post("/api/breakpoints", body, format="json")
    assert response.status_code in (201, 400), (response.status_code, form, response.content)
    if response.status_code == 400:
        assert response.json()["error"]["code"] == "validation_error"
    for budget in budgets:
        assert budget.spent <= budget.steps, (budget.spent, form)
    if response.status_code == 201:
        assert all(budget.stopped_at is None for budget in budgets), form


@pytest.fixture
def agent_api(tokens) -> APIClient:
    return APIClient(HTTP_AUTHORIZATION=f"Bearer {tokens['agent']}", SERVER_NAME="localhost")


@given(pattern=_PATTERNS, text=_TEXTS, as_names=st.booleans())
@settings(
    max_examples=FORM_EXAMPLES,
    deadline=None,
    suppress_health_check=list(HealthCheck),
    derandomize=DERANDOMIZE,
)
def test_generated_form_patterns_answer_201_or_400_within_the_budget(
    agent_api, pattern, text, as_names
):
    if as_names:
        form, proposal = {"type": "object", "propertyNames": {"pattern": pattern}}, {text: 1}
    else:
        field = {"type": "string", "pattern": pattern}
        form, proposal = {"type": "object", "properties": {"x": field}}, {"x": text}

    _post_form(agent_api, form, proposal)


@given(form=_ref_graphs(), depth=st.integers(1, 16), text=st.text("ab", max_size=20))
@settings(
    max_examples=FORM_EXAMPLES,
    deadline=None,
    suppress_health_check=list(HealthCheck),
    derandomize=DERANDOMIZE,
)
def test_generated_ref_graphs_answer_201_or_400_within_the_budget(agent_api, form, depth, text):
    _post_form(agent_api, form, _nested(depth, text))

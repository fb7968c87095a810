"""POST /api/events/{source} against hostile and broken deliveries, for every source kind.

Refused deliveries answer 400/401/404/413 in the error envelope and store nothing; a
redelivery is stored once; a rule that fails on an event records its error while the
others act. Nothing here may answer 500: every request goes through `post`, which
asserts it.
"""

import base64
import hashlib
import hmac
import json
import time
import uuid
from datetime import UTC, datetime

import pytest
from django.test import Client
from standardwebhooks.webhooks import Webhook as StandardWebhook

from audit.models import Event, EventType
from breakpoints.models import Breakpoint
from core.limits import MAX_COMMENT_LENGTH, MAX_PAYLOAD_VALUES, MAX_REASON_LENGTH
from triggers import services
from triggers.models import EventSource, ExternalEvent
from triggers.verification import sign_generic, sign_github

KINDS = ("standard-webhooks", "github", "gitlab", "generic-hmac")
SECRETS = {
    "standard-webhooks": "whsec_" + base64.b64encode(b"standard-webhooks-key-32-bytes!!").decode(),
    "github": "github-secret-0123456789",
    "gitlab": "gitlab-token-0123456789",
    "generic-hmac": "generic-secret-0123456789",
}
BODY = b'{"type": "order.paid", "run": "r-1", "count": 3}'


@pytest.fixture
def sources(db) -> dict[str, EventSource]:
    """One source per kind, named after its kind."""
    return {
        kind: EventSource.objects.create(name=kind, kind=kind, secret=SECRETS[kind])
        for kind in KINDS
    }


def standard_signature(secret: str, delivery: str, stamp: int, body: bytes) -> str:
    """What the standardwebhooks package signs, over raw bytes (it signs text only)."""
    try:
        signer = StandardWebhook(secret)
        return signer.sign(delivery, datetime.fromtimestamp(stamp, tz=UTC), body.decode())
    except UnicodeDecodeError:
        key = base64.b64decode(secret.removeprefix("whsec_"))
        digest = hmac.new(key, f"{delivery}.{stamp}.".encode() + body, hashlib.sha256).digest()
        return "v1," + base64.b64encode(digest).decode()


def signed(
    kind: str,
    body: bytes = BODY,
    *,
    delivery: str | None = None,
    stamp: int | None = None,
    secret: str | None = None,
    event_type: str = "order.paid",
) -> dict[str, str]:
    """The headers a genuine sender of this kind sends with this body."""
    secret = secret or SECRETS[kind]
    delivery = delivery or str(uuid.uuid4())
    stamp = int(time.time()) if stamp is None else stamp
    if kind == "standard-webhooks":
        return {
            "webhook-id": delivery,
            "webhook-timestamp": str(stamp),
            "webhook-signature": standard_signature(secret, delivery, stamp, body),
        }
    if kind == "github":
        return {
            "X-Hub-Signature-256": sign_github(secret, body),
            "X-GitHub-Delivery": delivery,
            "X-GitHub-Event": event_type,
        }
    if kind == "gitlab":
        return {
            "X-Gitlab-Token": secret,
            "X-Gitlab-Event-UUID": delivery,
            "X-Gitlab-Event": event_type,
        }
    return {
        "X-Bpm-Timestamp": str(stamp),
        "X-Bpm-Signature": sign_generic(secret, body, stamp),
        "X-Bpm-Event-Id": delivery,
        "X-Bpm-Event-Type": event_type,
    }


def post(source: str, body: bytes, headers: dict[str, str], content_type="application/json"):
    response = Client(raise_request_exception=False).post(
        f"/api/events/{source}",
        data=body,
        content_type=content_type,
        headers=headers,
        CONTENT_TYPE=content_type,  # the test client leaves it out when the body is empty
    )
    assert response.status_code < 500, response.content
    return response


def refused(response, *statuses: int) -> str:
    """The refusal's code, after checking its status and the error envelope."""
    assert response.status_code in statuses, (response.status_code, response.content)
    error = response.json()["error"]
    assert set(error) == {"code", "message", "details"} and error["message"]
    return error["code"]


# --- accepted ------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_a_good_signature_is_accepted_and_stored(sources, kind):
    headers = signed(kind, delivery="delivery-1")
    response = post(kind, BODY, headers)
    assert response.status_code == 202, response.content
    event = ExternalEvent.objects.get(pk=response.json()["eventId"])
    assert (event.source.name, event.delivery_id) == (kind, "delivery-1")
    assert event.type == "order.paid"  # the header's, or (Standard Webhooks) the payload's
    assert event.payload == json.loads(BODY)


# --- refused signatures and headers ----------------------------------------------------------


def _without(*names):
    return lambda kind, headers, body: ({k: v for k, v in headers.items() if k not in names}, body)


def _replace(**values):
    def mangle(kind, headers, body):
        return {**headers, **{k.replace("_", "-"): v for k, v in values.items()}}, body

    return mangle


def _restamped(offset: int):
    return lambda kind, headers, body: (signed(kind, body, stamp=int(time.time()) + offset), body)


def _tampered(kind, headers, body):
    return headers, body.replace(b"r-1", b"r-2")


def _other_secret(kind, headers, body):
    other = "whsec_" + base64.b64encode(b"x" * 32).decode() if kind == "standard-webhooks" else None
    return signed(kind, body, secret=other or "not-the-secret-0123456789"), body


REFUSALS = [
    *[(kind, "wrong secret", _other_secret) for kind in KINDS],
    *[(kind, "tampered body", _tampered) for kind in KINDS if kind != "gitlab"],
    ("standard-webhooks", "stale timestamp", _restamped(-400)),
    ("standard-webhooks", "future timestamp", _restamped(+400)),
    ("standard-webhooks", "no signature", _without("webhook-signature")),
    ("standard-webhooks", "no id", _without("webhook-id")),
    ("standard-webhooks", "no timestamp", _without("webhook-timestamp")),
    ("standard-webhooks", "v2 signature only", _replace(webhook_signature="v2,AAAA")),
    ("standard-webhooks", "signature not base64", _replace(webhook_signature="v1,!!!")),
    ("standard-webhooks", "signature without version", _replace(webhook_signature="abc")),
    ("standard-webhooks", "signature not ascii", _replace(webhook_signature="v1,\xe9\xe9")),
    ("standard-webhooks", "timestamp nan", _replace(webhook_timestamp="nan")),
    ("standard-webhooks", "timestamp inf", _replace(webhook_timestamp="inf")),
    ("standard-webhooks", "timestamp 1e400", _replace(webhook_timestamp="1e400")),
    ("github", "no signature", _without("X-Hub-Signature-256")),
    ("github", "sha1 signature", _replace(X_Hub_Signature_256="sha1=0123")),
    ("github", "signature not ascii", _replace(X_Hub_Signature_256="sha256=\xe9")),
    ("github", "no delivery", _without("X-GitHub-Delivery")),
    ("github", "no event", _without("X-GitHub-Event")),
    ("github", "delivery too long", _replace(X_GitHub_Delivery="d" * 201)),
    ("github", "event type too long", _replace(X_GitHub_Event="e" * 101)),
    ("gitlab", "no token", _without("X-Gitlab-Token")),
    ("gitlab", "no uuid", _without("X-Gitlab-Event-UUID")),
    ("gitlab", "no event", _without("X-Gitlab-Event")),
    ("generic-hmac", "stale timestamp", _restamped(-400)),
    ("generic-hmac", "future timestamp", _restamped(+400)),
    ("generic-hmac", "no timestamp", _without("X-Bpm-Timestamp")),
    ("generic-hmac", "no signature", _without("X-Bpm-Signature")),
    ("generic-hmac", "no event id", _without("X-Bpm-Event-Id")),
    ("generic-hmac", "timestamp not a number", _replace(X_Bpm_Timestamp="soon")),
    ("generic-hmac", "negative timestamp", _replace(X_Bpm_Timestamp="-1")),
    ("generic-hmac", "timestamp in ms", _restamped(int(time.time()) * 999)),
]


@pytest.mark.parametrize(
    ("kind", "mangle"),
    [(kind, mangle) for kind, _, mangle in REFUSALS],
    ids=[f"{kind}: {name}" for kind, name, _ in REFUSALS],
)
def test_a_refused_delivery_stores_nothing(sources, kind, mangle):
    headers, body = mangle(kind, signed(kind), BODY)
    code = refused(post(kind, body, headers), 400, 401)
    assert code in ("validation_error", "not_authenticated")
    assert not ExternalEvent.objects.exists()


# Header values a client can send that str.isdigit() accepts but int() or float() cannot
# take: each must be refused (401), not crash the view.
ODD_TIMESTAMPS = {
    "superscript digit": "\xb2",  # latin-1, as a header byte arrives: "²".isdigit() is True
    "400 digits": "9" * 400,  # int, but too large to subtract from a float
    "5000 digits": "9" * 5000,  # over Python's int-from-text limit
}


@pytest.mark.parametrize("value", ODD_TIMESTAMPS.values(), ids=list(ODD_TIMESTAMPS))
def test_a_generic_timestamp_that_is_not_a_plain_number_is_refused(sources, value):
    headers = {**signed("generic-hmac"), "X-Bpm-Timestamp": value}
    refused(post("generic-hmac", BODY, headers), 400, 401)
    assert not ExternalEvent.objects.exists()


# --- sources -------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["nope", "GitHub", "x" * 300, "caf%C3%A9", "..%2F", "%20"])
def test_an_unknown_source_is_404(sources, name):
    assert refused(post(name, BODY, signed("generic-hmac")), 404) == "not_found"


def test_a_nul_in_the_path_is_404_not_500(sources, admin_client):
    """PostgreSQL refuses NUL in text: a ref holding one must never reach a query."""
    assert refused(post("a%00b", BODY, signed("generic-hmac")), 404) == "not_found"
    admin_client.raise_request_exception = False
    assert admin_client.get("/api/events/evt_%00").status_code == 404


@pytest.mark.parametrize("kind", KINDS)
def test_a_disabled_source_is_404_even_with_a_good_signature(sources, admin, kind):
    services.source_set_enabled(actor=admin, name=kind, enabled=False)
    assert refused(post(kind, BODY, signed(kind)), 404) == "not_found"
    assert not ExternalEvent.objects.exists()


@pytest.mark.parametrize("method", ["get", "put", "patch", "delete"])
def test_other_methods_are_refused_without_a_token(sources, method):
    client = Client(raise_request_exception=False)
    body = {} if method == "get" else {"data": BODY, "content_type": "application/json"}
    response = getattr(client, method)("/api/events/github", **body)
    assert response.status_code in (401, 405)
    assert not ExternalEvent.objects.exists()


# --- bodies --------------------------------------------------------------------------------

NESTED = b'{"a": ' + b"[" * 150 + b"]" * 150 + b"}"  # over MAX_NESTING, under recursion
VERY_NESTED = b'{"a": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"  # past the recursion limit
BAD_BODIES = {
    "empty": b"",
    "malformed": b'{"a": ',
    "trailing garbage": b'{"a": 1} {"b": 2}',
    "array": b"[1, 2]",
    "string": b'"text"',
    "null": b"null",
    "NaN": b'{"a": NaN}',
    "-Infinity": b'{"a": -Infinity}',
    "NUL in a value": b'{"a": "x\\u0000y"}',
    "NUL in a key": b'{"\\u0000": 1}',
    "lone surrogate": b'{"a": "\\ud800"}',
    "lone surrogate key": b'{"\\udfff": 1}',
    "nested too deep": NESTED,
    "nested past recursion": VERY_NESTED,
    "too many values": json.dumps({"a": [0] * (MAX_PAYLOAD_VALUES + 1)}).encode(),
    "not utf-8": b'{"a": "\xff\xfe"}',
    "latin-1": '{"a": "caf\xe9"}'.encode("latin-1"),
    "utf-16": '{"a": 1}'.encode("utf-16"),
    "form encoded": b"payload=%7B%22a%22%3A1%7D",
}


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("body", BAD_BODIES.values(), ids=list(BAD_BODIES))
def test_a_signed_but_bad_body_is_400_and_stores_nothing(settings, sources, kind, body):
    settings.BPM_MAX_BODY_BYTES = 10 * 1024 * 1024  # the very nested body is ~200 kB
    assert refused(post(kind, body, signed(kind, body)), 400) == "validation_error"
    assert not ExternalEvent.objects.exists()


@pytest.mark.parametrize(
    "content_type", ["application/x-www-form-urlencoded", "text/plain", "multipart/form-data", ""]
)
def test_a_body_that_is_not_json_is_415_and_stores_nothing(sources, content_type):
    """GitHub's default content type is form-encoded: refused until the hook sends JSON."""
    body = b"payload=%7B%22a%22%3A1%7D"
    response = post("github", body, signed("github", body), content_type=content_type)
    assert refused(response, 415) == "unsupported_media_type"
    assert refused(post("github", BODY, signed("github", BODY), content_type=content_type), 415)
    assert not ExternalEvent.objects.exists()


def test_json_with_a_charset_is_json(sources):
    response = post(
        "github", BODY, signed("github"), content_type="application/json; charset=utf-8"
    )
    assert response.status_code == 202, response.content


@pytest.mark.parametrize("kind", KINDS)
def test_an_oversize_body_is_413_and_the_limit_itself_is_fine(settings, sources, kind):
    settings.BPM_MAX_BODY_BYTES = 2048
    filler = json.dumps({"pad": ""}).encode()
    exact = json.dumps({"pad": "x" * (2048 - len(filler))}).encode()
    over = json.dumps({"pad": "x" * (2049 - len(filler))}).encode()
    assert (len(exact), len(over)) == (2048, 2049)

    response = post(kind, over, signed(kind, over))
    assert refused(response, 413) == "payload_too_large"
    assert not ExternalEvent.objects.exists()
    assert post(kind, exact, signed(kind, exact)).status_code == 202


# --- redeliveries --------------------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_a_redelivery_is_200_duplicate_and_stored_once(sources, kind):
    first = post(kind, BODY, signed(kind, delivery="same-id"))
    time.sleep(1.1)  # a retry signs again, later
    other_body = b'{"type": "order.paid", "run": "r-9"}'
    again = post(kind, other_body, signed(kind, other_body, delivery="same-id"))

    assert (first.status_code, again.status_code) == (202, 200)
    assert again.json() == {"eventId": first.json()["eventId"], "duplicate": True}
    (event,) = ExternalEvent.objects.all()
    assert event.payload["run"] == "r-1"  # the first delivery's, kept


def test_the_same_delivery_id_from_two_sources_is_two_events(sources):
    for kind in ("github", "gitlab"):
        assert post(kind, BODY, signed(kind, delivery="shared")).status_code == 202
    assert ExternalEvent.objects.filter(delivery_id="shared").count() == 2


# --- rules that fail on an event -------------------------------------------------------------


def deliver_generic(payload: dict) -> ExternalEvent:
    body = json.dumps(payload).encode()
    response = post("generic-hmac", body, signed("generic-hmac", body, event_type="ci.done"))
    assert response.status_code == 202, response.content
    assert services.event_evaluate(response.json()["eventId"]) == "processed"
    return ExternalEvent.objects.get(pk=response.json()["eventId"])


def test_a_rule_that_fails_records_its_error_and_the_others_still_act(
    sources, admin, make_breakpoint
):
    bp = make_breakpoint(run_id="r-1")
    rule = {"actor": admin, "source": "generic-hmac", "event_type": "ci.*"}
    services.rule_add(
        **rule, name="a-type-error", action="cancel", conditions=["length(count) > `0`"],
        params={"selector": {"runId": "{{ run }}"}},
    )  # fmt: skip
    services.rule_add(
        **rule, name="b-release", action="release",
        params={"selector": {"runId": "{{ run }}"}, "feedback": "green: {{ run }}"},
    )  # fmt: skip
    services.rule_add(
        **rule, name="c-wrong-arity", action="create",
        params={"question": "Deploy {{ to_string(run, run) }}?"},
    )  # fmt: skip
    services.rule_add(
        **rule, name="d-unknown-function", action="cancel",
        params={"selector": {"runId": "{{ nope(run) }}"}},
    )  # fmt: skip

    event = deliver_generic({"run": "r-1", "count": 3})

    by_rule = {result["rule"]: result for result in event.results}
    assert "length()" in by_rule["a-type-error"]["error"]
    assert "to_string()" in by_rule["c-wrong-arity"]["error"]
    assert "nope()" in by_rule["d-unknown-function"]["error"]
    assert by_rule["b-release"]["actions"][0]["outcome"] == "released"
    assert Breakpoint.objects.get(pk=bp.pk).status == "released"
    assert Event.objects.filter(type=EventType.RELEASED).count() == 1
    assert not Breakpoint.objects.exclude(pk=bp.pk).exists()  # c created nothing
    assert services.event_evaluate(event.pk) == "skipped"


@pytest.mark.parametrize(
    ("action", "key", "limit"),
    [("release", "feedback", MAX_COMMENT_LENGTH), ("cancel", "reason", MAX_REASON_LENGTH)],
)
def test_a_long_value_a_template_passes_on_is_never_stored_whole(
    sources, admin, make_breakpoint, action, key, limit
):
    bp = make_breakpoint(run_id="r-1")
    services.rule_add(
        actor=admin,
        name="passes-the-note-on",
        action=action,
        params={"selector": {"runId": "{{ run }}"}, key: "{{ note }}"},
    )
    event = deliver_generic({"run": "r-1", "note": "x" * (limit + 1)})

    assert event.status == "processed"
    (taken,) = event.results[0]["actions"]
    bp.refresh_from_db()
    if taken["outcome"] != "refused":
        assert bp.status == ("released" if action == "release" else "cancelled")
        assert len(bp.result["feedback"]) <= limit  # the reason is the result's feedback


# --- limits: one sender's junk never costs genuine deliveries (issue 19 item 9) -----------


def test_verified_deliveries_are_not_held_back_by_refused_ones_from_their_address(
    sources, settings
):
    settings.BPM_THROTTLE_ANON_RATE = "3/min"
    settings.BPM_THROTTLE_EVENT_SOURCE_RATE = "1000/min"

    bad = [post("github", BODY, signed("github", secret="wrong")).status_code for _ in range(5)]
    genuine = [post("github", BODY, signed("github")).status_code for _ in range(10)]

    assert bad == [401, 401, 401, 429, 429]
    assert genuine == [202] * 10
    assert ExternalEvent.objects.count() == 10


def test_a_refused_delivery_past_the_address_limit_says_when_to_retry(sources, settings):
    settings.BPM_THROTTLE_ANON_RATE = "2/min"
    for _ in range(2):
        post("no-such-source", BODY, signed("github"))

    response = post("no-such-source", BODY, signed("github"))

    assert response.status_code == 429
    assert int(response["Retry-After"]) >= 1
    assert response.json()["error"]["code"] == "throttled"


def test_a_source_has_its_own_limit_and_nothing_past_it_is_stored(sources, settings):
    settings.BPM_THROTTLE_EVENT_SOURCE_RATE = "3/min"

    answers = [post("github", BODY, signed("github")) for _ in range(4)]
    other = post("gitlab", BODY, signed("gitlab"))

    assert [a.status_code for a in answers] == [202, 202, 202, 429]
    assert "Retry-After" in answers[-1]
    assert other.status_code == 202  # another source's budget is its own
    assert ExternalEvent.objects.filter(source=sources["github"]).count() == 3

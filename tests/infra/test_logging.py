"""Logs: JSON lines in production carrying the request id, agent, token and breakpoint id;
Celery tasks carry the context of the request that enqueued them."""

import io
import json
import logging
import os
import subprocess
import sys

import pytest
from django.conf import settings as django_settings
from django.utils import timezone
from django.utils.module_loading import import_string

from breakpoints.api.views import BreakpointViewSet
from infra import celery_signals
from infra.logging import JSONFormatter, RequestIDFilter, current_request_id, redact
from notifications.models import Delivery, Webhook
from notifications.tasks import deliver
from tests.support.project import ROOT


@pytest.fixture
def log_lines():
    """The JSON lines logged while the test runs (the production formatter and filter)."""
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JSONFormatter())
    handler.addFilter(RequestIDFilter())
    root = logging.getLogger()
    root.addHandler(handler)
    previous_level = root.level
    root.setLevel(logging.INFO)
    try:
        yield lambda: [json.loads(line) for line in stream.getvalue().splitlines()]
    finally:
        root.removeHandler(handler)
        root.setLevel(previous_level)


@pytest.fixture
def logging_retrieve(monkeypatch):
    """The breakpoint detail view logs one line while it serves the request."""
    original = BreakpointViewSet.retrieve

    def retrieve(self, request, pk):
        logging.getLogger("breakpoints.api").info("Reading %s", pk)
        return original(self, request, pk)

    monkeypatch.setattr(BreakpointViewSet, "retrieve", retrieve)


def test_production_logs_through_the_json_formatter():
    assert django_settings.LOG_FORMAT == "json"  # the suite runs with DEBUG off
    formatters = [handler.formatter for handler in logging.getLogger().handlers]
    assert any(isinstance(formatter, JSONFormatter) for formatter in formatters)


def test_a_json_line_has_the_documented_fields(log_lines):
    token = current_request_id.set("req-123")
    try:
        logging.getLogger("bpm.test").warning("Hello %s", "world", extra={"breakpoint_id": "bp-1"})
    finally:
        current_request_id.reset(token)
    (line,) = [entry for entry in log_lines() if entry["logger"] == "bpm.test"]
    assert line["message"] == "Hello world"
    assert line["level"] == "WARNING"
    assert line["request_id"] == "req-123"
    assert line["breakpoint_id"] == "bp-1"
    assert line["timestamp"].endswith("Z")


def test_an_exception_is_kept_in_one_line(log_lines):
    try:
        raise ValueError("boom")
    except ValueError:
        logging.getLogger("bpm.test").exception("Failed")
    (line,) = [entry for entry in log_lines() if entry["logger"] == "bpm.test"]
    assert "ValueError: boom" in line["exception"]


@pytest.mark.django_db
def test_a_request_log_line_carries_request_id_agent_token_and_breakpoint(
    log_lines, logging_retrieve, agent_client, agent_token, make_breakpoint
):
    bp = make_breakpoint()

    response = agent_client.get(f"/api/breakpoints/{bp.pk}", HTTP_X_REQUEST_ID="req-abc-1")

    assert response.status_code == 200
    (line,) = [entry for entry in log_lines() if entry["message"] == f"Reading {bp.pk}"]
    assert line["request_id"] == "req-abc-1"
    assert line["breakpoint_id"] == bp.pk
    assert line["agent"] == "agent-a"
    assert agent_token.startswith(line["token"])


@pytest.mark.django_db
def test_lines_outside_a_request_have_no_request_context(log_lines, agent_client, make_breakpoint):
    bp = make_breakpoint()
    agent_client.get(f"/api/breakpoints/{bp.pk}")
    logging.getLogger("bpm.test").info("After")
    (line,) = [entry for entry in log_lines() if entry["message"] == "After"]
    assert line["request_id"] == "-"
    assert "breakpoint_id" not in line and "agent" not in line


def test_publishing_a_task_puts_the_request_context_in_its_headers():
    headers: dict = {}
    token = current_request_id.set("req-pub-1")
    try:
        celery_signals._publish_log_context(headers=headers)
    finally:
        current_request_id.reset(token)
    assert headers[celery_signals.LOG_CONTEXT_HEADER]["request_id"] == "req-pub-1"


def test_publishing_outside_a_request_adds_no_header():
    headers: dict = {}
    celery_signals._publish_log_context(headers=headers)
    assert celery_signals.LOG_CONTEXT_HEADER not in headers


@pytest.mark.django_db
def test_a_task_run_with_the_header_logs_with_the_enqueuing_request_id(log_lines, make_breakpoint):
    """The delivery task logs a failed attempt; its line carries the publisher's context."""
    bp = make_breakpoint()
    webhook = Webhook.objects.create(url="http://127.0.0.1:9/hook")  # refused: loopback
    delivery = Delivery.objects.create(
        webhook=webhook,
        breakpoint=bp,
        event_type="created",
        body={},
        next_attempt_at=timezone.now(),
    )
    context = {"request_id": "req-task-7", "agent": "agent-a", "breakpoint_id": bp.pk}

    result = deliver.apply(args=[delivery.pk], headers={celery_signals.LOG_CONTEXT_HEADER: context})

    assert result.get() in ("retry", "failed")
    (line,) = [
        entry for entry in log_lines() if entry["message"].startswith(f"Delivery {delivery.pk}")
    ]
    assert line["request_id"] == "req-task-7"
    assert line["breakpoint_id"] == bp.pk
    assert line["agent"] == "agent-a"
    assert current_request_id.get() == "-"  # the task's context did not leak out


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({"DEBUG": "1"}, "plain"),
        ({"DEBUG": "0"}, "json"),
        ({"DEBUG": "1", "LOG_FORMAT": "json"}, "json"),
        ({"DEBUG": "0", "LOG_FORMAT": "plain"}, "plain"),
    ],
)
def test_the_format_follows_debug_unless_log_format_says(env, expected):
    environment = {
        key: value
        for key, value in os.environ.items()
        if key not in ("DEBUG", "LOG_FORMAT", "DJANGO_SETTINGS_MODULE")
    }
    environment.update(env, SECRET_KEY="test-only", DJANGO_SETTINGS_MODULE="config.settings")
    code = "from django.conf import settings; print(settings.LOGGING['handlers']['console']['formatter'])"
    result = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env=environment,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert result.stdout.strip() == expected


def test_extra_fields_of_a_call_reach_the_json_line(log_lines):
    logging.getLogger("breakpoints.audit").warning(
        "JIRA webhook refused", extra={"channel": "jira", "reason": "bad secret"}
    )
    (line,) = [entry for entry in log_lines() if entry["message"] == "JIRA webhook refused"]
    assert (line["channel"], line["reason"]) == ("jira", "bad secret")
    assert "args" not in line and "levelno" not in line  # the record's own fields stay out


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('"GET /decide/eyJhYmMi.sig-_x HTTP/1.1" 200', '"GET /decide/[redacted] HTTP/1.1" 200'),
        ("POST /decide/tok?x=1", "POST /decide/[redacted]?x=1"),
        (
            "/integrations/jira/webhook?a=1&secret=s3cr3t&b=2",
            "/integrations/jira/webhook?a=1&secret=[redacted]&b=2",
        ),
        ("/api/breakpoints/bp-1/status?wait=30", "/api/breakpoints/bp-1/status?wait=30"),
        # The server reads a key in any case a client writes it, and percent-decoded.
        (
            '"GET /integrations/jira/webhook?SECRET=s3cr3t HTTP/1.1" 200',
            '"GET /integrations/jira/webhook?SECRET=[redacted] HTTP/1.1" 200',
        ),
        (
            "/integrations/jira/webhook?Secret=s3cr3t",
            "/integrations/jira/webhook?Secret=[redacted]",
        ),
        (
            "/integrations/jira/webhook?%73ecret=s3cr3t",
            "/integrations/jira/webhook?%73ecret=[redacted]",
        ),
        (
            "/integrations/jira/webhook?%2573ECRET=s3cr3t",
            "/integrations/jira/webhook?%2573ECRET=[redacted]",
        ),
        ("/x?a=1;secret=s3cr3t", "/x?a=1;secret=[redacted]"),
        # Other credentials a client may put in a URL.
        ("/api/breakpoints?token=bpm_abc&page=2", "/api/breakpoints?token=[redacted]&page=2"),
        (
            "/x?access_token=abc&API_KEY=def&password=ghi",
            "/x?access_token=[redacted]&API_KEY=[redacted]&password=[redacted]",
        ),
        ("/x?sig=abc&signature=def", "/x?sig=[redacted]&signature=[redacted]"),
        ("/x?secret=ab?cd&b=2", "/x?secret=[redacted]&b=2"),  # the whole value, as Django reads it
        ("/admin/login/?next=/x%3Fsecret%3Dabc", "/admin/login/?next=/x%3Fsecret%3Dabc"),
        ("/admin/login/?next=/x?secret=abc", "/admin/login/?next=/x?secret=[redacted]"),
        ("<WSGIRequest: GET '/y?SECRET=abc'>", "<WSGIRequest: GET '/y?SECRET=[redacted]'>"),
        # Keys that name no credential keep their values; so does an empty secret.
        (
            "/api/rules/evaluate?key=plan-review&design=x&tag=t",
            "/api/rules/evaluate?key=plan-review&design=x&tag=t",
        ),
        ("/integrations/jira/webhook?secret=", "/integrations/jira/webhook?secret="),
        ("POST /DECIDE/tok", "POST /DECIDE/[redacted]"),
    ],
)
def test_secrets_in_urls_are_redacted(text, expected):
    assert redact(text) == expected


def test_a_bad_decision_link_logs_why_but_no_token(db, client):
    """Through the production handler (its formatter and filters): the refusal is logged
    with its `extra` fields, and nothing of the token."""
    handler = next(
        h for h in logging.getLogger().handlers if isinstance(h.formatter, JSONFormatter)
    )
    stream = io.StringIO()
    probe = logging.StreamHandler(stream)
    probe.setFormatter(handler.formatter)
    for each in handler.filters:
        probe.addFilter(each)
    logging.getLogger().addHandler(probe)
    try:
        response = client.get("/decide/not-a-real-token-SECRET42")
    finally:
        logging.getLogger().removeHandler(probe)
    assert response.status_code >= 400
    lines = [json.loads(line) for line in stream.getvalue().splitlines()]
    assert any(line.get("reason") == "bad_signature" for line in lines), lines
    assert "SECRET42" not in stream.getvalue()


@pytest.mark.parametrize(
    "method, path, secret",
    [
        ("put", "/decide/tok-SECRET42", "SECRET42"),  # 405: Django's warning names the request
        ("get", "/integrations/jira/webhook?secret=JIRASECRET42", "JIRASECRET42"),
        ("get", "/integrations/jira/webhook?SECRET=JIRASECRET42", "JIRASECRET42"),
        ("get", "/integrations/jira/webhook?%73ecret=JIRASECRET42", "JIRASECRET42"),
    ],
)
@pytest.mark.parametrize("formatter", ["json", "plain"])
def test_djangos_request_warnings_carry_no_url_secret(
    db, client, settings, method, path, secret, formatter
):
    """django.request logs `extra={"request": request}`, whose repr is the path."""
    config = settings.LOGGING["formatters"][formatter]
    factory = {k: v for k, v in config.items() if k != "()"}
    stream = io.StringIO()
    probe = logging.StreamHandler(stream)
    probe.setFormatter(import_string(config["()"])(**factory))
    logging.getLogger().addHandler(probe)
    try:
        response = getattr(client, method)(path)
    finally:
        logging.getLogger().removeHandler(probe)

    assert response.status_code >= 400
    logged = stream.getvalue()
    assert path.split("?")[0].removesuffix("tok-SECRET42") in logged  # the warning was written
    assert secret not in logged

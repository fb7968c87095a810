"""Slack interactions (POST /integrations/slack/interactions): a button clicked, a modal sent.

Slack signs every request with SLACK_SIGNING_SECRET (v0: HMAC-SHA256 of
"v0:{timestamp}:{raw body}"). It is checked on the raw body before anything is parsed,
with slack-sdk's SignatureVerifier, which also refuses a timestamp more than 5 minutes
off (a replay). A missing, forged or stale signature gets 401 and one WARNING on the
`breakpoints.audit` log, nothing else; then channels.slack.actions acts.
"""

import json
import logging
import re
from typing import Any
from urllib.parse import parse_qs

from django.conf import settings
from django.http import HttpRequest, HttpResponse, HttpResponseNotAllowed, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from slack_sdk.signature import SignatureVerifier

from channels.slack import actions as slack_actions
from core.storable import storable_document

audit_log = logging.getLogger("breakpoints.audit")
TIMESTAMP = re.compile(r"[0-9]{1,12}")
SIGNATURE = re.compile(r"v0=[0-9a-f]{64}")


@csrf_exempt
def view(request: HttpRequest, *args: object, **kwargs: object) -> HttpResponse:
    """Verify, parse, act; Slack waits 3 s at most, so every step is short."""
    if request.method != "POST":
        return HttpResponseNotAllowed(["POST"])
    secret = settings.SLACK_SIGNING_SECRET
    if not secret:
        return _answer(503, "Slack interactions are not configured.")
    problem = signature_problem(request, secret)
    if problem:
        audit_log.warning(
            "Slack interaction refused: %s",
            problem,
            extra={"slack_refusal": problem, "remote_addr": request.META.get("REMOTE_ADDR")},
        )
        return _answer(401, "Invalid or expired Slack signature.")
    payload = parsed_payload(request.body)
    if payload is None:
        return _answer(400, "Malformed interaction payload.")
    return slack_actions.dispatch(payload)


def signature_problem(request: HttpRequest, secret: str) -> str:
    """Why the request is not Slack's, now: "" when it is."""
    timestamp = request.headers.get("X-Slack-Request-Timestamp", "")
    signature = request.headers.get("X-Slack-Signature", "")
    if not timestamp or not signature:
        return "no signature"
    if not TIMESTAMP.fullmatch(timestamp) or not SIGNATURE.fullmatch(signature):
        return "malformed signature headers"
    try:
        valid = SignatureVerifier(secret).is_valid(
            body=request.body, timestamp=timestamp, signature=signature
        )
    except (UnicodeDecodeError, ValueError):
        valid = False
    return "" if valid else "bad or stale signature"


def parsed_payload(body: bytes) -> dict[str, Any] | None:
    """The form field `payload` as a JSON object with a string `type`, or None (also when
    text in it is not what a database can hold: NUL, a lone surrogate)."""
    try:
        form = parse_qs(body.decode("utf-8"), strict_parsing=True, max_num_fields=20)
        payload = json.loads(form["payload"][-1])
    except (UnicodeDecodeError, ValueError, KeyError, IndexError, RecursionError):
        return None
    if not isinstance(payload, dict) or not isinstance(payload.get("type"), str):
        return None
    return payload if storable_document(payload) else None  # no NUL, no lone surrogate


def _answer(status: int, message: str) -> JsonResponse:
    return JsonResponse({"error": message}, status=status)

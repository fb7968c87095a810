"""The JIRA webhook (POST /integrations/jira/webhook): a status change to "Approved" or
"Rejected" on an issue the JIRA channel created decides its breakpoint, as the JIRA user
JIRA's own changelog names (asked through JIRA's API, never taken from the body).

The caller proves itself with the shared secret JIRA_WEBHOOK_SECRET: the header
X-Bpm-Webhook-Secret, or `?secret=` in the URL, because JIRA's admin webhooks can only
put it there (then keep the URL out of access logs you share). Nothing is parsed before
the secret matches. What it means is jira_events' business.

What we answer, and why. JIRA Cloud retries a webhook on 408, 409, 425, 429, any 5xx, a
timeout or a failed connection, for about half an hour; Data Center does not retry.
- 503 while JIRA_WEBHOOK_SECRET is unset: the endpoint is off; a retry may find it on.
- 401 for a missing or wrong secret, 400 for a body that is not a JSON object (or whose
  issue key, changelog id, labels or user hold a NUL or a lone surrogate): the same
  request would fail the same way, so an answer JIRA does not retry; JIRA's webhook log
  shows it to whoever configured the webhook.
- 200 for every authentic, well-formed event, whatever came of it: decided, ignored
  (another event or status, an issue we did not create), refused (a change JIRA's
  changelog does not confirm, JIRA out of reach, an unknown user, not a reviewer, not a
  seat, already decided: audited, and undone in JIRA) or a duplicate. Retrying changes
  none of these, and anything but 2xx would have JIRA send it again. The JSON body says
  what happened, for JIRA's log and for people.
- A 5xx only when we fail (the database is down): then JIRA's retry is what we want,
  and it is safe, since a repeated decision finds its own earlier one and stops.
"""

import hmac
import json
import logging

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST

from channels.jira import JIRA
from channels.jira import events as jira_events

SECRET_HEADER = "X-Bpm-Webhook-Secret"
audit_log = logging.getLogger("breakpoints.audit")


def _answer(status: int, outcome: str, detail: str) -> JsonResponse:
    return JsonResponse(
        {"ok": 200 <= status < 300, "outcome": outcome, "detail": detail}, status=status
    )


def _secret_matches(request: HttpRequest) -> bool:
    """A constant-time comparison with JIRA_WEBHOOK_SECRET (header first, else ?secret=)."""
    given = request.headers.get(SECRET_HEADER) or request.GET.get("secret") or ""
    expected = settings.JIRA_WEBHOOK_SECRET
    return hmac.compare_digest(given.encode("utf-8", "replace"), expected.encode("utf-8"))


@csrf_exempt
@require_POST
def view(request: HttpRequest) -> HttpResponse:
    """Verify, parse, decide; see the module docstring for the statuses."""
    if not settings.JIRA_WEBHOOK_SECRET:
        return _answer(503, "off", "The JIRA webhook is off: JIRA_WEBHOOK_SECRET is not set.")
    if not _secret_matches(request):
        audit_log.warning(
            "JIRA webhook refused: missing or wrong secret (from %s)",
            request.META.get("REMOTE_ADDR", "?"),
            extra={"channel": JIRA, "reason": "bad secret"},
        )
        return _answer(401, "refused", "Missing or wrong webhook secret.")
    try:
        payload = json.loads(request.body)
    except RequestDataTooBig:
        return _answer(413, "refused", "The body is too large.")
    except (ValueError, RecursionError):
        return _answer(400, "refused", "The body is not JSON.")
    if not isinstance(payload, dict):
        return _answer(400, "refused", "The body is not a JSON object.")
    try:
        change = jira_events.status_change(payload)
    except jira_events.Ignored as ignored:
        return _answer(200, "ignored", str(ignored))
    except jira_events.Malformed as malformed:
        return _answer(400, "refused", str(malformed))
    handled = jira_events.decide(change)
    return _answer(200, handled.outcome, handled.detail)

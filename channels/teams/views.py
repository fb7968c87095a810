"""The bot's messaging endpoint (POST /integrations/teams/messages): what the Bot Framework
sends the bot, a button pressed on a card above all.

The bearer token is checked before anything else is read (channels.teams.auth); a
missing, forged, expired or foreign one gets 401 and one WARNING on the
`breakpoints.audit` log, nothing else. Then the body is read (Django's and the ASGI
layer's size limits hold), and the token must be for this activity (its serviceurl, its
key's endorsement): else 401 too. A Teams user of another tenant, an unknown user or one
who may not decide is told so on the card, and recorded (channels.teams.actions).

Answers: 200 with the invoke response (the refreshed card) for an `adaptiveCard/action`
invoke, 200 with no body for any other activity (a message, a member added: not ours to
act on), 503 while Teams is off or the Bot Framework's keys cannot be fetched.
"""

import json
import logging
from typing import Any

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest, HttpResponse, HttpResponseNotAllowed, JsonResponse
from django.views.decorators.csrf import csrf_exempt

from channels.teams import actions as teams_actions
from channels.teams import auth
from core.storable import storable_document
from web.errors import error_response

audit_log = logging.getLogger("breakpoints.audit")
REFUSED = "Invalid, expired or foreign Bot Framework token."
# The Bot Framework retries an invoke it got a 503 for; its keys are fetched again by then.
KEYS_RETRY_AFTER_SECONDS = 30


@csrf_exempt
def view(request: HttpRequest, *args: object, **kwargs: object) -> HttpResponse:
    """Verify, parse, act; see the module docstring for the answers."""
    if request.method != "POST":
        return HttpResponseNotAllowed(["POST"])
    if not settings.TEAMS_APP_ID:
        return error_response(503, "unavailable", "Teams is not configured.")
    try:
        verified = auth.verified(request.headers.get("Authorization", ""))
    except auth.Refused as exc:
        return _refused(request, str(exc))
    except auth.KeysUnavailable as exc:
        audit_log.warning("Teams request not verified: %s", exc)
        unavailable = error_response(
            503, "unavailable", "The Bot Framework's keys are out of reach."
        )
        unavailable["Retry-After"] = str(KEYS_RETRY_AFTER_SECONDS)
        return unavailable
    try:
        activity = _activity(request.body)
    except RequestDataTooBig:
        return error_response(413, "payload_too_large", "The body is too large.")
    if activity is None:
        return error_response(400, "validation_error", "The body is not a Bot Framework activity.")
    problem = auth.activity_problem(verified, activity)
    if problem:
        return _refused(request, problem)
    if activity.get("type") != "invoke" or activity.get("name") != teams_actions.INVOKE_NAME:
        return HttpResponse(status=200)
    press = teams_actions.pressed(activity)
    if press is None:
        return error_response(400, "validation_error", "Malformed adaptiveCard/action invoke.")
    return JsonResponse(teams_actions.act(press))


def _refused(request: HttpRequest, reason: str) -> JsonResponse:
    audit_log.warning(
        "Teams request refused: %s",
        reason,
        extra={"teams_refusal": reason, "remote_addr": request.META.get("REMOTE_ADDR")},
    )
    return error_response(401, "not_authenticated", REFUSED)


def _activity(body: bytes) -> dict[str, Any] | None:
    """The body as an activity: a JSON object with a string `type` whose text a database
    can hold (no NUL, no lone surrogate), or None."""
    try:
        activity = json.loads(body)
    except (ValueError, RecursionError):
        return None
    if not isinstance(activity, dict) or not isinstance(activity.get("type"), str):
        return None
    return activity if storable_document(activity) else None

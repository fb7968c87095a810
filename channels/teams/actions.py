"""What an authentic button press on a Teams card does (an `adaptiveCard/action` invoke):
decide, or refuse, and answer with the card as it now is.

The Teams user becomes a reviewer through the connector's roster: the member the invoke
comes from (GET {serviceUrl}/v3/conversations/{id}/members/{userId}, whose Entra object
id must be the invoke's) gives their email or user principal name, and exactly one
active account must have it (accounts.people.person_with_email). When TEAMS_TENANT_ID is
set, a user of another tenant is refused first. The decision goes through feedback_add
like any other, so the API's permissions, seats, self-review and single decision hold. A
refusal is recorded as a REFUSED audit event: by the service that refused it, or here
when the Teams user matches no account, and the answer is the card saying so. The card
is also replaced by the outbox (the released event's Teams delivery), however the
decision was taken.
"""

import re
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.utils import timezone

from accounts.people import TWINS_REFUSAL, NoSinglePerson, person_with_email
from audit.models import EventType
from audit.services import refusal_record
from breakpoints.models import Breakpoint
from breakpoints.payload.validation import options_of
from breakpoints.representation.contract import breakpoint_json
from breakpoints.services import feedback_add
from channels.teams import TEAMS, cards
from channels.teams.messages import ConnectorError, connector, member_url
from core import limits
from core.actors import Actor
from core.choices import Status
from core.exceptions import DomainError, Forbidden, InvalidInput
from core.storable import storable_text

INVOKE_NAME = "adaptiveCard/action"
MEMBER_TIMEOUT_SECONDS = 3  # Teams shows the user an error when the answer takes too long
DECIDED_VOTE = "Your vote is recorded; the breakpoint waits for the other seats."
TEAMS_ID = re.compile(r"[A-Za-z0-9:_\-.@;=]{1,200}")
OBJECT_ID = re.compile(r"[0-9a-fA-F-]{36}")
OUTCOME_EVENTS: dict[str, str] = {
    Status.RELEASED: EventType.RELEASED,
    Status.EXPIRED: EventType.EXPIRED,
    Status.CANCELLED: EventType.CANCELLED,
}


@dataclass(frozen=True)
class Press:
    """Who pressed which button of which breakpoint's card, and what they typed."""

    user_id: str  # the Teams user id (29:...)
    object_id: str  # their Entra object id
    tenant: str
    conversation: str
    service_url: str
    verb: str
    breakpoint_id: str
    comment: str
    option: str  # the chosen option's index, as the choice set sends it

    @property
    def who(self) -> str:
        return self.object_id or self.user_id


def _object(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _text(value: Any, limit: int = 200) -> str:
    fits = isinstance(value, str) and len(value) <= limit and storable_text(value)
    return value if fits else ""


def pressed(activity: dict[str, Any]) -> Press | None:
    """The press in an `adaptiveCard/action` invoke, or None when it is malformed."""
    action = _object(_object(activity.get("value")).get("action"))
    data = _object(action.get("data"))
    sender, conversation = _object(activity.get("from")), _object(activity.get("conversation"))
    tenant = _object(_object(activity.get("channelData")).get("tenant")).get("id")
    user_id = _text(sender.get("id"))
    conversation_id = _text(conversation.get("id"), 500)
    if not TEAMS_ID.fullmatch(user_id) or not conversation_id:
        return None
    comment = data.get(cards.COMMENT_INPUT) or ""
    if not isinstance(comment, str) or not storable_text(comment):
        return None
    object_id = _text(sender.get("aadObjectId"), 36)
    return Press(
        user_id=user_id,
        object_id=object_id if OBJECT_ID.fullmatch(object_id) else "",
        tenant=_text(tenant or conversation.get("tenantId"), 100),
        conversation=conversation_id,
        service_url=_text(activity.get("serviceUrl"), 500),
        verb=_text(action.get("verb"), 40),
        breakpoint_id=_text(data.get("breakpointId"), limits.BREAKPOINT_ID_LENGTH),
        comment=comment,
        option=_text(data.get(cards.OPTION_INPUT), 10),
    )


def invoke_answer(content: dict[str, Any]) -> dict[str, Any]:
    """The body Teams expects for an Action.Execute: the card that replaces the pressed one."""
    return {"statusCode": 200, "type": cards.CONTENT_TYPE, "value": content}


def act(press: Press) -> dict[str, Any]:
    """Decide (or refuse) the press; the invoke's answer."""
    if press.verb not in (cards.APPROVE, cards.REJECT, cards.OPTION):
        return invoke_answer(cards.message("This button is not one of Breakpoint Manager's."))
    bp = Breakpoint.objects.filter(pk=press.breakpoint_id).first() if press.breakpoint_id else None
    if bp is None:
        return invoke_answer(cards.message("This breakpoint does not exist (any more)."))
    notice = ""
    try:
        if len(press.comment) > limits.MAX_COMMENT_LENGTH:
            raise InvalidInput(f"Feedback has at most {limits.MAX_COMMENT_LENGTH} characters.")
        user = reviewer_for(press)
        if _decide(press, user, bp):
            notice = DECIDED_VOTE
    except DomainError as exc:  # a refusal is on the record: the service's, or reviewer_for's
        notice = exc.message
    return invoke_answer(refreshed_card(bp.pk, notice))


def refreshed_card(breakpoint_id: str, notice: str = "") -> dict[str, Any]:
    """The breakpoint's card as it is now: decided, or still with its buttons."""
    bp = Breakpoint.objects.get(pk=breakpoint_id)
    data = breakpoint_json(bp)
    event = OUTCOME_EVENTS.get(bp.status)
    if event is not None:
        return cards.outcome(data, event, notice=notice)
    return cards.announcement(data, EventType.CREATED, timezone.now(), notice=notice)


def reviewer_for(press: Press) -> Any:
    """The one active account whose email is this Teams user's; Forbidden otherwise (the
    channel's own refusal, recorded here: no person to ask the services about)."""
    try:
        return _person(press)
    except Forbidden as exc:
        refusal_record(
            breakpoint_id=press.breakpoint_id,
            via=TEAMS,
            who=press.who,
            reason=exc.code,
            message=exc.message,
            action=press.verb,
            teams_user=press.user_id,
        )
        raise


def _person(press: Press) -> Any:
    tenant = settings.TEAMS_TENANT_ID
    if tenant and press.tenant.lower() != tenant.lower():
        raise Forbidden("Your Teams account is not of the organization this bot serves.")
    email = _member_email(press)
    try:
        return person_with_email(email)
    except NoSinglePerson as exc:
        what_to_do = (
            "ask an admin to set it on your account"
            if str(exc) != TWINS_REFUSAL
            else "more than one has it: ask an admin to deactivate all but yours"
        )
        raise Forbidden(
            f"No single active Breakpoint Manager account has your Teams email "
            f"({email[:254]}); {what_to_do}."
        ) from None


def _member_email(press: Press) -> str:
    """The email (else the user principal name) the conversation's roster gives the user."""
    url = member_url(press.service_url, press.conversation, press.user_id)
    try:
        member = connector("GET", url, timeout=MEMBER_TIMEOUT_SECONDS)
    except ConnectorError as exc:
        raise Forbidden(
            f"Teams did not say who you are ({exc.message}); try again, or decide in the console."
        ) from None
    if press.object_id and member.get("aadObjectId") != press.object_id:
        raise Forbidden("Teams' roster does not know you as the user who pressed the button.")
    for key in ("email", "userPrincipalName"):
        value = member.get(key)
        if isinstance(value, str) and "@" in value:
            return value.strip()
    raise Forbidden("Your Teams profile shows no email, so you cannot be matched to a reviewer.")


def _decide(press: Press, user: Any, bp: Breakpoint) -> bool:
    """Release through the service; True when it was a vote that decided nothing yet."""
    option: str | None = None
    approved: bool | None = press.verb == cards.APPROVE
    if press.verb == cards.OPTION:
        options = options_of(bp.payload)
        if not press.option.isdigit() or int(press.option) >= len(options):
            raise InvalidInput("Choose one of this breakpoint's options first.")
        option, approved = options[int(press.option)].label, None  # its verdict decides
    actor = Actor.for_user(user).known_as(press.who, action=press.verb, teams_user=press.user_id)
    _, bp = feedback_add(
        breakpoint_id=bp.pk,
        actor=actor,
        comment=press.comment.strip(),
        release=True,
        approved=approved,
        option=option,
        via=TEAMS,
    )
    return bp.status == Status.WAITING

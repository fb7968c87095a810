"""What an authentic Slack interaction does: decide, open the reject modal, or refuse.

The Slack user becomes a reviewer through their email (users.info, then exactly one
active account with that email: accounts.people.person_with_email); the decision goes
through feedback_add like any other, so the API's permissions, seats and single decision
hold. A refusal is told to that user alone (an ephemeral message, or an error in the
modal) and, the breakpoint being known, recorded as a REFUSED audit event: by the
service that refused it, or here when the Slack user matches no account. The message itself is updated by the outbox (the
released event's Slack delivery), however the decision was taken.
"""

import json
import logging
import re
from dataclasses import dataclass
from typing import Any

from django.http import HttpResponse, JsonResponse
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError, SlackClientError

from accounts.people import TWINS_REFUSAL, NoSinglePerson, person_with_email
from audit.services import refusal_record
from breakpoints.models import Breakpoint
from breakpoints.payload.validation import options_of
from breakpoints.services import feedback_add, release_check
from channels.slack import SLACK, modals
from channels.slack import blocks as slack_blocks
from channels.slack.messages import NETWORK_ERRORS, web_client
from core import limits
from core.actors import Actor
from core.choices import Status
from core.exceptions import DomainError, Forbidden, InvalidInput
from core.storable import storable_text

logger = logging.getLogger(__name__)
SLACK_TIMEOUT_SECONDS = 2  # each call; the whole answer must reach Slack within 3 s
SLACK_ID = re.compile(r"[A-Z0-9]{2,40}")
DECIDED_VOTE = "Your vote is recorded; the breakpoint waits for the other seats."


@dataclass(frozen=True)
class Interaction:
    """Who acted, on which breakpoint, and where to answer them."""

    user_id: str
    breakpoint_id: str
    action_id: str
    channel: str = ""
    trigger_id: str = ""
    message_ts: str = ""


def dispatch(payload: dict[str, Any]) -> HttpResponse:
    if payload["type"] == "block_actions":
        return block_actions(payload)
    if payload["type"] == "view_submission":
        return view_submission(payload)
    return HttpResponse(status=200)  # other interactions are not ours to act on


def _text(value: Any, limit: int = 200) -> str:
    """The value when it is text we can store (also what private_metadata decodes to)."""
    fits = isinstance(value, str) and len(value) <= limit and storable_text(value)
    return value if fits else ""


def _object(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _clicked(payload: dict[str, Any]) -> Interaction | None:
    """The button's interaction from a block_actions payload, or None if malformed."""
    actions, user = payload.get("actions"), payload.get("user")
    if not isinstance(actions, list) or not actions or not isinstance(actions[0], dict):
        return None
    user_id = _text(user.get("id")) if isinstance(user, dict) else ""
    if not SLACK_ID.fullmatch(user_id):
        return None
    container, channel = _object(payload.get("container")), _object(payload.get("channel"))
    return Interaction(
        user_id=user_id,
        breakpoint_id=_text(actions[0].get("value"), limits.BREAKPOINT_ID_LENGTH),
        action_id=_text(actions[0].get("action_id")),
        channel=_text(channel.get("id")) or _text(container.get("channel_id")),
        trigger_id=_text(payload.get("trigger_id"), 500),
        message_ts=_text(container.get("message_ts")),
    )


def block_actions(payload: dict[str, Any]) -> HttpResponse:
    """Approve or an option decides now; Reject opens the modal. 200 with no body."""
    clicked = _clicked(payload)
    if clicked is None:
        return JsonResponse({"error": "Malformed block_actions payload."}, status=400)
    action = clicked.action_id
    ours = (slack_blocks.APPROVE, slack_blocks.REJECT, slack_blocks.EDIT)
    if action not in ours and not action.startswith(slack_blocks.OPTION_PREFIX):
        return HttpResponse(status=200)  # the console link, or nothing of ours
    client = web_client(SLACK_TIMEOUT_SECONDS)
    bp = (
        Breakpoint.objects.filter(pk=clicked.breakpoint_id).first()
        if clicked.breakpoint_id
        else None
    )
    if bp is None:
        ephemeral(client, clicked, "This breakpoint does not exist (any more).")
        return HttpResponse(status=200)
    try:
        user = reviewer_for(client, clicked)
        if action == slack_blocks.REJECT:
            _open_reject(client, clicked, user, bp)
        elif action == slack_blocks.EDIT:
            _open_edit(client, clicked, user, bp)
        elif _decide(clicked, user, bp, comment="", approved=True):
            ephemeral(client, clicked, DECIDED_VOTE)
    except DomainError as exc:  # a refusal is on the record: the service's, or reviewer_for's
        ephemeral(client, clicked, exc.message)
    return HttpResponse(status=200)


def reviewer_for(client: WebClient, interaction: Interaction) -> Any:
    """The one active account whose email is this Slack user's; Forbidden otherwise (the
    channel's own refusal, recorded here: no person to ask the services about)."""
    try:
        return _person(client, interaction.user_id)
    except Forbidden as exc:
        refusal_record(
            breakpoint_id=interaction.breakpoint_id,
            via=SLACK,
            who=interaction.user_id,
            reason=exc.code,
            message=exc.message,
            action=interaction.action_id,
        )
        raise


def _person(client: WebClient, slack_user_id: str) -> Any:
    """The account of this Slack user, by email (accounts.people.person_with_email)."""
    try:
        user = client.users_info(user=slack_user_id).get("user") or {}
    except SlackApiError as exc:
        data = getattr(exc.response, "data", None)
        code = data.get("error") if isinstance(data, dict) else "error"
        raise Forbidden(f"Your Slack account could not be looked up ({code}).") from None
    except (SlackClientError, *NETWORK_ERRORS):
        raise Forbidden(
            "Slack did not answer who you are; try again, or decide in the console."
        ) from None
    user = _object(user)
    email = _object(user.get("profile")).get("email")
    if user.get("deleted") or user.get("is_bot") or not isinstance(email, str) or not email:
        raise Forbidden(
            "Your Slack profile shows no email, so you cannot be matched to a reviewer."
        )
    try:
        return person_with_email(email)
    except NoSinglePerson as exc:
        what_to_do = (
            "ask an admin to set it on your account"
            if str(exc) != TWINS_REFUSAL
            else "more than one has it: ask an admin to deactivate all but yours"
        )
        raise Forbidden(
            f"No single active Breakpoint Manager account has your Slack email "
            f"({email[:254]}); {what_to_do}."
        ) from None


def _actor(interaction: Interaction, user: Any) -> Actor:
    """The person, as Slack knows them: a refusal names their Slack id and the action."""
    return Actor.for_user(user).known_as(interaction.user_id, action=interaction.action_id)


def _decide(
    interaction: Interaction,
    user: Any,
    bp: Breakpoint,
    *,
    comment: str,
    approved: bool | None,
    values: dict[str, Any] | None = None,
) -> bool:
    """Release through the service; True when it was a vote that decided nothing yet."""
    option = None
    action = interaction.action_id
    if action.startswith(slack_blocks.OPTION_PREFIX):
        index = action.removeprefix(slack_blocks.OPTION_PREFIX)
        options = options_of(bp.payload)
        if not index.isdigit() or int(index) >= len(options):
            raise InvalidInput("That option is not one of this breakpoint's options.")
        option, approved = options[int(index)].label, None  # the option's verdict decides
    _, bp = feedback_add(
        breakpoint_id=bp.pk,
        actor=_actor(interaction, user),
        comment=comment,
        release=True,
        approved=approved,
        option=option,
        values=values,
        via=SLACK,
    )
    return bp.status == Status.WAITING


def _open_reject(client: WebClient, clicked: Interaction, user: Any, bp: Breakpoint) -> None:
    """The feedback modal, once the user may release it at all (asked again on submit)."""
    release_check(breakpoint_id=bp.pk, actor=_actor(clicked, user), via=SLACK)
    metadata = {"bp": bp.pk, "channel": clicked.channel, "ts": clicked.message_ts}
    view = slack_blocks.reject_modal(
        {"title": bp.title, "key": bp.key, "question": bp.question, "breakpointId": bp.pk},
        private_metadata=json.dumps(metadata),
    )
    _modal_open(client, clicked, bp, view, "The reject form could not be opened; try again.")


def _open_edit(client: WebClient, clicked: Interaction, user: Any, bp: Breakpoint) -> None:
    """The "Edit and approve" modal of a form that fits one (asked again on submit)."""
    release_check(breakpoint_id=bp.pk, actor=_actor(clicked, user), via=SLACK)
    if modals.editable_fields(bp.payload) is None:
        raise InvalidInput("This form cannot be edited in Slack: edit it in the console.")
    metadata = {"bp": bp.pk, "channel": clicked.channel, "ts": clicked.message_ts}
    view = slack_blocks.edit_modal(
        {"title": bp.title, "key": bp.key, "question": bp.question, "breakpointId": bp.pk},
        bp.payload,
        private_metadata=json.dumps(metadata),
    )
    _modal_open(client, clicked, bp, view, "The form could not be opened; try again.")


def _modal_open(
    client: WebClient, clicked: Interaction, bp: Breakpoint, view: dict[str, Any], failed: str
) -> None:
    """Open `view` for the person who clicked; if Slack will not, tell them (`failed`)."""
    try:
        client.views_open(trigger_id=clicked.trigger_id, view=view)
    except (SlackClientError, *NETWORK_ERRORS) as exc:
        logger.warning("Slack views.open failed for %s: %s", bp.pk, type(exc).__name__)
        ephemeral(client, clicked, failed)


def view_submission(payload: dict[str, Any]) -> HttpResponse:
    """The reject modal sent: reject with its feedback, or show what is wrong in it. The
    edit modal sent: approve with its values (edit_submission)."""
    view = payload.get("view")
    if isinstance(view, dict) and view.get("callback_id") == modals.EDIT_MODAL:
        return edit_submission(payload, view)
    submitted = _submitted(payload)
    if submitted is None:
        return HttpResponse(status=200)  # not our modal
    interaction, comment = submitted
    if not SLACK_ID.fullmatch(interaction.user_id):
        return JsonResponse({"error": "Malformed view_submission payload."}, status=400)
    if len(comment) > limits.MAX_COMMENT_LENGTH:
        return _modal_error(f"At most {limits.MAX_COMMENT_LENGTH} characters.")
    bp = Breakpoint.objects.filter(pk=interaction.breakpoint_id).first()
    if bp is None:
        return _modal_error("This breakpoint does not exist (any more).")
    client = web_client(SLACK_TIMEOUT_SECONDS)
    try:
        user = reviewer_for(client, interaction)
        if _decide(interaction, user, bp, comment=comment, approved=False):
            ephemeral(client, interaction, DECIDED_VOTE)
    except DomainError as exc:  # a refusal is on the record: the service's, or reviewer_for's
        return _modal_error(exc.message)
    return HttpResponse(status=200)  # closes the modal


def edit_submission(payload: dict[str, Any], view: dict[str, Any]) -> HttpResponse:
    """Approve with the modal's values through the service, or answer each problem on the
    block of its field (Slack keeps the modal open)."""
    metadata = _metadata(view)
    user = payload.get("user")
    interaction = Interaction(
        user_id=_text(user.get("id")) if isinstance(user, dict) else "",
        breakpoint_id=_text(metadata.get("bp"), limits.BREAKPOINT_ID_LENGTH),
        action_id=slack_blocks.EDIT,
        channel=_text(metadata.get("channel")),
        message_ts=_text(metadata.get("ts")),
    )
    if not SLACK_ID.fullmatch(interaction.user_id):
        return JsonResponse({"error": "Malformed view_submission payload."}, status=400)
    first = modals.block_id(0)
    bp = Breakpoint.objects.filter(pk=interaction.breakpoint_id).first()
    if bp is None:
        return _errors({first: "This breakpoint does not exist (any more)."})
    state = _object(view.get("state")).get("values")
    values, problems = modals.submitted_values(bp.payload, state)
    if problems:
        return _errors(problems)
    client = web_client(SLACK_TIMEOUT_SECONDS)
    try:
        user = reviewer_for(client, interaction)
        if _decide(interaction, user, bp, comment="", approved=True, values=values):
            ephemeral(client, interaction, DECIDED_VOTE)
    except InvalidInput as exc:
        return _errors(modals.problems_by_block(bp.payload, exc.details) or {first: exc.message})
    except DomainError as exc:  # a refusal is on the record: the service's, or reviewer_for's
        return _errors({first: exc.message})
    return HttpResponse(status=200)  # closes the modal


def _metadata(view: dict[str, Any]) -> dict[str, Any]:
    """Our modal's private_metadata (the breakpoint, the message), or {}."""
    try:
        metadata = json.loads(_text(view.get("private_metadata"), 3000) or "{}")
    except ValueError:
        return {}
    return metadata if isinstance(metadata, dict) else {}


def _errors(by_block: dict[str, str]) -> JsonResponse:
    """Slack shows each message under its block, and keeps the modal open."""
    errors = {block: message[:2000] for block, message in by_block.items()}
    return JsonResponse({"response_action": "errors", "errors": errors})


def _submitted(payload: dict[str, Any]) -> tuple[Interaction, str] | None:
    """(who, on which breakpoint; the feedback typed) from our modal's submission."""
    view, user = payload.get("view"), payload.get("user")
    if not isinstance(view, dict) or view.get("callback_id") != slack_blocks.REJECT_MODAL:
        return None
    try:
        metadata = json.loads(_text(view.get("private_metadata"), 3000) or "{}")
        values = view["state"]["values"][slack_blocks.FEEDBACK_BLOCK]
        comment = values[slack_blocks.FEEDBACK_INPUT].get("value") or ""
    except (ValueError, KeyError, TypeError, AttributeError):
        metadata, comment = None, ""
    if not isinstance(metadata, dict) or not isinstance(comment, str):
        metadata, comment = {}, ""
    interaction = Interaction(
        user_id=_text(user.get("id")) if isinstance(user, dict) else "",
        breakpoint_id=_text(metadata.get("bp"), limits.BREAKPOINT_ID_LENGTH),
        action_id=slack_blocks.REJECT,
        channel=_text(metadata.get("channel")),
        message_ts=_text(metadata.get("ts")),
    )
    return interaction, comment


def _modal_error(message: str) -> JsonResponse:
    """Slack shows it under the feedback field, and keeps the modal open."""
    return JsonResponse(
        {"response_action": "errors", "errors": {slack_blocks.FEEDBACK_BLOCK: message[:2000]}}
    )


def ephemeral(client: WebClient, interaction: Interaction, text: str) -> None:
    """Tell the one user who clicked; Slack being down must not fail the answer."""
    if not interaction.channel:
        return
    try:
        client.chat_postEphemeral(
            channel=interaction.channel, user=interaction.user_id, text=slack_blocks.escape(text)
        )
    except (SlackClientError, *NETWORK_ERRORS) as exc:
        logger.warning("Slack chat.postEphemeral failed: %s", type(exc).__name__)

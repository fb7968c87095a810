"""What the Slack channel posts: the breakpoint message, DMs, reminders, and the update
that shows the outcome, whoever decided and wherever (Slack, console, the agent)."""

from django.db import transaction
from django.test import Client

from audit.models import Event
from breakpoints.representation.contract import breakpoint_json, console_url
from breakpoints.services import breakpoint_cancel
from channels.slack.blocks import MORE
from core.actors import Actor
from notifications.outbox import deliveries_enqueue
from policies.routes import route_add
from tests.support.console import action_url
from tests.support.slack import (
    CHANNEL,
    PUBLIC_URL,
    action_ids,
    all_text,
    announce,
    attempt,
    deliveries,
    only,
)

FILES = [
    {"path": f"src/step_{i}.py", "format": "code", "language": "python", "content": body}
    for i, body in enumerate(
        ["\n".join(f"line {n} of file {i}" for n in range(1, 21)) for i in range(7)]
    )
]

pytest_plugins = ["tests.support.slack"]  # standin, people, slack_route


def rich_payload(**extra) -> dict:
    return {
        "title": "Deploy to production",
        "question": "Ship build 42 to prod?",
        "options": ["Ship", {"label": "Hold", "approved": False}],
        "context": {"files": FILES},
        **extra,
    }


def sections(blocks: list[dict]) -> list[str]:
    return [b["text"]["text"] for b in blocks if b["type"] == "section" and "text" in b]


def fields(blocks: list[dict]) -> dict[str, str]:
    found = {}
    for block in blocks:
        for field in block.get("fields", []):
            name, _, value = field["text"].partition("\n")
            found[name.strip("*")] = value
    return found


def test_created_message_shows_the_breakpoint_and_its_buttons(
    standin, slack_route, make_breakpoint
):
    bp = make_breakpoint(
        payload=rich_payload(), tags=["prod", "deploy"], run_id="run-7", ttl_seconds=7200
    )

    delivery = attempt(only(bp))

    assert delivery.status == "delivered", delivery.last_error
    (posted,) = standin.succeeded("chat.postMessage")
    assert posted["channel"] == CHANNEL
    assert delivery.reply == {"channel": CHANNEL, "ts": posted_ts(standin)}
    blocks = posted["blocks"]
    assert blocks[0] == {
        "type": "header",
        "text": {"type": "plain_text", "text": "Deploy to production"},
    }
    assert "Ship build 42 to prod?" in sections(blocks)
    shown = fields(blocks)
    assert shown["Agent"] == "agent-a"
    assert shown["Run"] == "run-7"
    assert shown["Tags"] == "prod, deploy"
    assert shown["Time left"].startswith(("1h 59m left", "2h left"))
    assert "<!date^" in shown["Time left"]
    # The first lines of each file (five shown), not the rest, and how many more there are.
    text = all_text(blocks)
    for i in range(5):
        assert f"src/step_{i}.py" in text and f"line 8 of file {i}" in text
        assert f"line 9 of file {i}" not in text
    assert "src/step_5.py" not in text and "+2 more file(s) in the console." in text
    assert action_ids(blocks) == [
        "bpm_approve",
        "bpm_reject",
        "bpm_console",
        "bpm_option_0",
        "bpm_option_1",
    ]
    buttons = [e for b in blocks if b["type"] == "actions" for e in b["elements"]]
    assert [b["text"]["text"] for b in buttons[3:]] == ["Ship", "Hold"]
    assert {b.get("value") for b in buttons if b["action_id"] != "bpm_console"} == {bp.pk}
    assert buttons[2]["url"] == console_url(bp.pk)
    assert buttons[2]["url"].startswith(PUBLIC_URL)
    (event,) = Event.objects.filter(breakpoint_id=bp.pk, type="notification")
    assert event.metadata["outcome"] == "delivered"
    assert event.metadata["target"] == {"channel": CHANNEL}


def posted_ts(standin) -> str:
    return next(ts for (_, ts) in standin.messages)


def mrkdwn_texts(node) -> list[str]:
    if isinstance(node, list):
        return [text for item in node for text in mrkdwn_texts(item)]
    if not isinstance(node, dict):
        return []
    own = [node["text"]] if node.get("type") == "mrkdwn" else []
    return own + [text for value in node.values() for text in mrkdwn_texts(value)]


HOSTILE = "<!channel> <@U0BOSS> & <https://evil.example|click me> *bold*"


def test_hostile_agent_text_is_escaped_and_cut_to_slacks_limits(
    standin, slack_route, make_breakpoint
):
    payload = {
        "title": HOSTILE + " " + "T" * 400,
        "question": HOSTILE * 200,  # far over 3000 characters once escaped
        "options": [HOSTILE + "o" * 100],
        "context": {
            "files": [{"path": "<!here>.md", "format": "code", "content": "```\n<!everyone>\n```"}]
        },
    }
    bp = make_breakpoint(payload=payload, tags=["<!here>"], run_id="<@U0RUN>")

    attempt(only(bp))

    (posted,) = standin.succeeded("chat.postMessage")
    # mrkdwn is where Slack parses <!channel>, <@U..> and <url|label>; plain_text is never.
    text = "\n".join([*mrkdwn_texts(posted["blocks"]), posted["text"]])
    for raw in ("<!channel>", "<!here>", "<!everyone>", "<@U0BOSS>", "<@U0RUN>", "<https://evil"):
        assert raw not in text
    assert "&lt;!channel&gt; &lt;@U0BOSS&gt; &amp; &lt;https://evil.example|click me&gt;" in text
    question = next(s for s in sections(posted["blocks"]) if s.startswith("&lt;!channel"))
    assert len(question) <= 3000 and question.endswith(MORE)
    assert not question.removesuffix(MORE).endswith(("&", "&l", "&lt", "&am", "&amp"))
    header = posted["blocks"][0]["text"]["text"]
    assert len(header) <= 150 and header.endswith("…")
    for block in posted["blocks"]:
        if block["type"] == "section" and "text" in block:
            assert len(block["text"]["text"]) <= 3000
        for element in block.get("elements", []):
            if element.get("type") == "button":
                assert len(element["text"]["text"]) <= 75
    # Nothing breaks out of the file's code block.
    file_section = next(s for s in sections(posted["blocks"]) if "&lt;!here&gt;.md" in s)
    assert file_section.count("```") == 2


def test_experts_get_a_dm_found_by_their_email(standin, people, make_breakpoint):
    route_add(
        actor=Actor.for_user(people["admin"]),
        name="dm-experts",
        pattern="*",
        channels=[{"kind": "slack", "to": "experts"}],
    )
    bp = make_breakpoint(payload={"question": "Merge?", "title": "PR", "expert": "tech-lead"})

    delivery = attempt(only(bp))

    assert delivery.target == {"email": "tina@example.com", "user": people["tina"].pk}
    assert standin.succeeded("users.lookupByEmail") == [{"email": "tina@example.com"}]
    (posted,) = standin.succeeded("chat.postMessage")
    assert posted["channel"] == "U0TINA"
    assert delivery.reply["channel"] == "D0TINA"  # the bot's DM with her
    assert fields(posted["blocks"])["Routed to"] == "tech-lead"


def test_a_dm_to_an_email_slack_does_not_know_fails_at_once(standin, people, make_breakpoint):
    people["tina"].email = "tina@elsewhere.example"
    people["tina"].save()
    route_add(
        actor=Actor.for_user(people["admin"]),
        name="dm-experts",
        pattern="*",
        channels=[{"kind": "slack", "to": "experts"}],
    )
    bp = make_breakpoint(payload={"question": "Merge?", "title": "PR", "expert": "tech-lead"})

    delivery = attempt(only(bp))

    assert delivery.status == "failed"
    assert "users_not_found" in delivery.last_error
    assert standin.succeeded("chat.postMessage") == []


def enqueue(bp, event_type: str) -> None:
    with transaction.atomic():
        deliveries_enqueue(breakpoint=bp, data=breakpoint_json(bp), event_type=event_type)


def test_a_reminder_goes_in_the_thread_of_the_posted_message(standin, slack_route, make_breakpoint):
    bp = make_breakpoint(payload=rich_payload(), ttl_seconds=600)
    reply = announce(bp)

    enqueue(bp, "reminder")
    reminder = attempt(only(bp, "reminder"))

    assert reminder.status == "delivered"
    _, posted = standin.succeeded("chat.postMessage")
    assert posted["channel"] == reply["channel"] and posted["thread_ts"] == reply["ts"]
    assert "Reminder" in posted["blocks"][0]["text"]["text"]
    assert action_ids(posted["blocks"]) == []  # the buttons are in the message above


def test_a_reminder_before_the_message_is_posted_is_a_whole_message(
    standin, slack_route, make_breakpoint
):
    bp = make_breakpoint(payload=rich_payload(), ttl_seconds=600)
    enqueue(bp, "escalated")

    escalated = attempt(only(bp, "escalated"))

    assert escalated.status == "delivered"
    (posted,) = standin.succeeded("chat.postMessage")
    assert "thread_ts" not in posted or posted["thread_ts"] is None
    assert "Escalated" in all_text(posted["blocks"])
    assert "bpm_approve" in action_ids(posted["blocks"])


def test_a_console_decision_updates_the_slack_message(
    standin, slack_route, make_breakpoint, people
):
    bp = make_breakpoint(payload=rich_payload())
    reply = announce(bp)
    browser = Client()
    browser.force_login(people["rita"])
    data = {"decision": "reject", "comment": "Not on a Friday <!channel>"}

    assert browser.post(action_url("release", bp.pk), data).status_code == 200
    browser.post(action_url("release", bp.pk), {**data, "confirm": "yes"})
    bp.refresh_from_db()
    assert bp.status == "released" and bp.feedback.get().via == "console"

    released = attempt(only(bp, "released"))

    assert released.status == "delivered", released.last_error
    (update,) = standin.succeeded("chat.update")
    assert (update["channel"], update["ts"]) == (reply["channel"], reply["ts"])
    decision = sections(update["blocks"])[0]
    assert decision.startswith(":x: *Rejected* by rita")
    assert "> Not on a Friday &lt;!channel&gt;" in decision
    assert action_ids(update["blocks"]) == []
    assert standin.message(reply["channel"], reply["ts"])["blocks"] == update["blocks"]
    assert len(standin.succeeded("chat.postMessage")) == 1


def test_a_cancellation_updates_the_slack_message(standin, slack_route, make_breakpoint):
    bp = make_breakpoint(payload=rich_payload())
    reply = announce(bp)

    breakpoint_cancel(breakpoint_id=bp.pk, actor=Actor.for_agent("agent-a"), reason="Plan changed")
    attempt(only(bp, "cancelled"))

    (update,) = standin.succeeded("chat.update")
    assert update["ts"] == reply["ts"]
    assert sections(update["blocks"])[0].startswith(":no_entry_sign: *Cancelled* by agent:agent-a")
    assert "Plan changed" in sections(update["blocks"])[0]
    assert action_ids(update["blocks"]) == []


def test_the_outcome_waits_for_the_message_it_updates(standin, slack_route, make_breakpoint):
    bp = make_breakpoint(payload=rich_payload())
    breakpoint_cancel(breakpoint_id=bp.pk, actor=Actor.for_agent("agent-a"))

    early = attempt(only(bp, "cancelled"))

    assert early.status == "pending"
    assert early.last_error == "the message to update is not posted yet"
    assert standin.calls() == []
    reply = announce(bp)
    assert attempt(early).status == "delivered"
    (update,) = standin.succeeded("chat.update")
    assert update["ts"] == reply["ts"]


def test_the_outcome_is_a_new_message_when_the_first_one_failed(
    standin, slack_route, make_breakpoint
):
    bp = make_breakpoint(payload=rich_payload())
    standin.missing_channels.add(CHANNEL)
    assert attempt(only(bp)).status == "failed"
    standin.missing_channels.clear()
    breakpoint_cancel(breakpoint_id=bp.pk, actor=Actor.for_agent("agent-a"))

    assert attempt(only(bp, "cancelled")).status == "delivered"

    assert standin.succeeded("chat.update") == []
    (posted,) = standin.succeeded("chat.postMessage")
    assert "*Cancelled*" in all_text(posted["blocks"])


def test_the_outcome_is_a_new_message_when_the_first_one_was_deleted(
    standin, slack_route, make_breakpoint
):
    bp = make_breakpoint(payload=rich_payload())
    reply = announce(bp)
    del standin.messages[(reply["channel"], reply["ts"])]  # someone deleted it in Slack
    breakpoint_cancel(breakpoint_id=bp.pk, actor=Actor.for_agent("agent-a"))

    assert attempt(only(bp, "cancelled")).status == "delivered"

    assert [c.ok for c in standin.calls("chat.update")] == [False]
    assert len(standin.succeeded("chat.postMessage")) == 2
    assert len(deliveries(bp, "cancelled")) == 1

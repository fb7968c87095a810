"""Teams cards show what the agent sent as written (never as markdown, never a {{function}}),
cut visibly, with the buttons and inputs that decide; routes name a conversation."""

from datetime import UTC, datetime, timedelta

import pytest

from audit.models import EventType
from channels.teams import cards
from core.actors import Actor
from core.channels import channel_provider
from core.exceptions import InvalidInput
from policies.routes import route_add
from tests.support.factories import AdminFactory

NOW = datetime(2025, 5, 1, 12, 0, tzinfo=UTC)
HOSTILE = (
    "**Approve** [click](https://evil.example) _now_ {{DATE(2025-01-01T00:00:00Z)}} <at>all</at>"
)


def data(**overrides) -> dict:
    base = {
        "breakpointId": "bp_123",
        "title": "Deploy",
        "question": "Ship it?",
        "agentId": "agent-a",
        "expiresAt": (NOW + timedelta(hours=3, minutes=12)).isoformat(),
        "tags": ["prod"],
        "payload": {"question": "Ship it?"},
    }
    return {**base, **overrides}


def elements(node) -> list[dict]:
    """Every element of a card, nested ones included."""
    found = []
    if isinstance(node, dict):
        if "type" in node:
            found.append(node)
        for value in node.values():
            found += elements(value)
    elif isinstance(node, list):
        for item in node:
            found += elements(item)
    return found


def texts_read_as_markdown(card: dict) -> list[str]:
    """The texts Teams would parse as markdown: TextBlocks' and FactSets'."""
    shown = []
    for element in elements(card):
        if element["type"] == "TextBlock":
            shown.append(element["text"])
        if element["type"] == "FactSet":
            shown += [fact["value"] for fact in element["facts"]]
    return shown


def runs(card: dict) -> list[str]:
    return [element["text"] for element in elements(card) if element["type"] == "TextRun"]


def test_agent_text_is_never_read_as_markdown_nor_as_a_function():
    hostile = data(
        title=HOSTILE,
        question=HOSTILE,
        agentId=HOSTILE,
        tags=[HOSTILE],
        payload={"question": "q", "context": {"files": [{"path": "a.md", "content": HOSTILE}]}},
    )
    card = cards.announcement(hostile, EventType.CREATED, NOW)

    assert texts_read_as_markdown(card) == []
    shown = [text for text in runs(card) if "Approve" in text]
    assert len(shown) >= 4  # title, question, agent, tags, the file
    for text in shown:
        assert "{{" not in text and "{\u200b{DATE" in text
        assert "**Approve** [click](https://evil.example)" in text  # as written, literally


def test_long_text_is_cut_and_says_so():
    card = cards.announcement(data(question="x" * 10_000), EventType.CREATED, NOW)
    (question,) = [text for text in runs(card) if text.startswith("xxx")]
    assert len(question) == cards.TEXT_MAX
    assert question.endswith(cards.MORE)


def test_a_file_shows_its_first_lines_in_monospace():
    content = "\n".join(f"line {n}" for n in range(20))
    files = [{"path": "deploy.sh", "content": content}]
    card = cards.announcement(
        data(payload={"question": "q", "context": {"files": files}}), EventType.CREATED, NOW
    )
    (excerpt,) = [e for e in elements(card) if e.get("fontType") == "Monospace"]
    assert excerpt["text"].splitlines()[: cards.FILE_LINES] == [f"line {n}" for n in range(8)]
    assert excerpt["text"].endswith("\n…")


def test_the_card_decides_with_approve_reject_a_comment_and_the_options():
    payload = {"question": "Which?", "options": [{"label": "Ship"}, {"label": "Hold", "approved": False}]}  # fmt: skip
    card = cards.announcement(data(payload=payload), EventType.CREATED, NOW)

    executes = [a for a in card["actions"] if a["type"] == "Action.Execute"]
    assert [(a["verb"], a["data"]) for a in executes] == [
        ("approve", {"breakpointId": "bp_123"}),
        ("reject", {"breakpointId": "bp_123"}),
        ("option", {"breakpointId": "bp_123"}),
    ]
    (console,) = [a for a in card["actions"] if a["type"] == "Action.OpenUrl"]
    assert "/bp_123/" in console["url"]
    inputs = {e["id"]: e for e in elements(card) if e["type"].startswith("Input.")}
    assert inputs["comment"]["isMultiline"] is True
    assert [(c["title"], c["value"]) for c in inputs["option"]["choices"]] == [
        ("Ship", "0"),
        ("Hold", "1"),
    ]
    assert card["version"] == "1.4"


def test_the_facts_say_agent_and_time_left():
    shown = " ".join(runs(cards.announcement(data(), EventType.CREATED, NOW)))
    assert "agent-a" in shown
    assert "3h 12m left (until 2025-05-01 15:12 UTC)" in shown


def test_a_decided_card_has_no_buttons_and_says_who_decided():
    decided = data(
        status="released",
        result={"approved": False, "respondedBy": "rita", "feedback": "**Not** today"},
    )
    card = cards.outcome(decided, EventType.RELEASED)

    assert [a["type"] for a in card["actions"]] == ["Action.OpenUrl"]
    assert not [e for e in elements(card) if e["type"].startswith("Input.")]
    assert "Rejected" in runs(card) and " by rita" in runs(card)
    assert "**Not** today" in runs(card)
    assert texts_read_as_markdown(card) == []


def test_a_reminder_is_a_banner_with_the_time_left():
    card = cards.nudge(data(), EventType.REMINDER, NOW)
    assert runs(card)[0] == cards.BANNERS[EventType.REMINDER]
    assert runs(card)[1].startswith("3h 12m left")


# --- routes ------------------------------------------------------------------------------


@pytest.fixture
def admin(db):
    return Actor.for_user(AdminFactory(username="root"))


def test_a_route_names_a_conversation(admin):
    spec = {"kind": "teams", "conversation": "19:abc@thread.tacv2"}
    assert route_add(actor=admin, name="t", pattern="*", channels=[spec]).channels == [spec]


@pytest.mark.parametrize(
    "spec",
    [
        {"kind": "teams"},
        {"kind": "teams", "conversation": " "},
        {"kind": "teams", "conversation": 19},
        {"kind": "teams", "conversation": "x" * 201},
    ],
    ids=["missing", "blank", "not-text", "too-long"],
)
def test_a_route_without_a_usable_conversation_is_refused(admin, spec):
    with pytest.raises(InvalidInput) as refused:
        route_add(actor=admin, name="t", pattern="*", channels=[spec])
    assert 'needs "conversation"' in refused.value.details["channels[0]"][0]


def test_experts_are_not_a_teams_target(admin):
    with pytest.raises(InvalidInput) as refused:
        route_add(actor=admin, name="t", pattern="*", channels=[{"kind": "teams", "to": "experts"}])
    assert refused.value.details == {"channels[0]": ["A teams channel has no to."]}


def test_the_openapi_shape_of_a_teams_spec():
    (shape,) = channel_provider("teams").spec_schemas()
    assert shape["required"] == ["kind", "conversation"]
    assert shape["additionalProperties"] is False

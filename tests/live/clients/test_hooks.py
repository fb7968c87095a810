"""`bpm hook claude-code` and `bpm hook codex` as the hosts run them: a subprocess with the
host's documented PermissionRequest input on stdin (tests/fixtures/hooks/), its decision
JSON on stdout, exit 0.

Against the live server (tests/live/clients/conftest.py): while the hook waits, the reviewer
alice decides through the REST API with her own token. Each test gives the fixture a
session id of its own, the breakpoint's run.
"""

import json
import re
import uuid
from pathlib import Path
from typing import Any

import pytest
from bpm_client import Client

from tests.live.clients.conftest import BPM
from tests.support.cli import Done, Running, bpm
from tests.support.net import free_port

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "hooks"
HOSTS = ("claude-code", "codex")
WAITING = re.compile(r"bpm hook [\w-]+: asked (\S+), waiting for a decision")


def hook_input(host: str, session_id: str) -> dict[str, Any]:
    """The host's documented input (a Bash command), in the session `session_id`."""
    given = json.loads((FIXTURES / host / "permission-request-bash.json").read_text())
    return {**given, "session_id": session_id}


def running_hook(host: str, given: dict[str, Any], env: dict[str, str]) -> Running:
    """A `bpm hook HOST` the host started, `given` on its stdin."""
    return Running([BPM, "hook", host], env, stdin=json.dumps(given))


def waiting_on(hook: Running) -> str:
    """The id of the breakpoint the hook waits on (from its note on stderr)."""
    return hook.noted(WAITING.pattern)


@pytest.fixture
def start_hook(bpm_env):
    """start_hook(host, given) -> a running `bpm hook`; whatever still runs at the end is killed."""
    started: list[Running] = []

    def start(host: str, given: dict[str, Any], env: dict[str, str] | None = None) -> Running:
        running = running_hook(host, given, env or bpm_env)
        started.append(running)
        return running

    yield start
    for running in started:
        running.kill()


@pytest.fixture
def session_id() -> str:
    return str(uuid.uuid4())


def decision_of(done: Done) -> dict[str, Any]:
    """The decision the host reads: exit 0, one JSON object on stdout, in its shape."""
    assert done.code == 0, done.stderr
    output = json.loads(done.stdout)
    assert list(output) == ["hookSpecificOutput"]
    assert output["hookSpecificOutput"]["hookEventName"] == "PermissionRequest"
    return output["hookSpecificOutput"]["decision"]


def no_decision(done: Done) -> str:
    """Exit 0, nothing on stdout (the host asks its user), and why in the last line on
    stderr (after the note of the breakpoint it waited on, if it got that far)."""
    assert done.code == 0, done.stderr
    assert done.stdout == ""
    assert "Traceback" not in done.stderr, done.stderr
    lines = done.stderr.splitlines()
    assert lines, "no reason given"
    assert all(line.startswith("bpm hook ") for line in lines), done.stderr
    assert all(WAITING.match(line) for line in lines[:-1]), done.stderr
    return lines[-1]


@pytest.mark.parametrize("host", HOSTS)
def test_an_approval_allows_the_tool_call(host, start_hook, session_id, reviewer: Client):
    given = hook_input(host, session_id)
    hook = start_hook(host, given)
    breakpoint_id = waiting_on(hook)

    asked = reviewer.get(breakpoint_id)
    assert asked.key == f"{host}.bash"
    assert asked.run_id == session_id
    assert host in asked.tags
    assert asked.payload["proposal"] == given["tool_input"]
    assert sorted(asked.payload["form"]["properties"]) == sorted(given["tool_input"])
    assert given["tool_input"]["command"] in (asked.title or "")
    reviewer.release(breakpoint_id, "go ahead")

    assert decision_of(hook.finish()) == {"behavior": "allow"}


def test_claude_code_runs_the_input_a_reviewer_edited(start_hook, session_id, reviewer: Client):
    given = hook_input("claude-code", session_id)
    hook = start_hook("claude-code", given)
    breakpoint_id = waiting_on(hook)
    edited = {**given["tool_input"], "command": "rm -rf ./node_modules/.cache"}

    reviewer.release(breakpoint_id, "only the cache", values=edited)

    assert decision_of(hook.finish()) == {"behavior": "allow", "updatedInput": edited}


def test_codex_is_refused_with_the_edit_a_reviewer_approved(
    start_hook, session_id, reviewer: Client
):
    """Codex does not run an input a hook rewrote (it fails closed on `updatedInput`): an
    approval with edited values is a refusal whose message gives them."""
    given = hook_input("codex", session_id)
    hook = start_hook("codex", given)
    breakpoint_id = waiting_on(hook)
    edited = {"command": "rm -f /tmp/example.lock"}

    reviewer.release(breakpoint_id, "just the lock file", values=edited)

    decision = decision_of(hook.finish())
    assert decision["behavior"] == "deny"
    assert "updatedInput" not in decision
    assert json.dumps(edited) in decision["message"]
    assert "just the lock file" in decision["message"]
    assert "alice" in decision["message"]


@pytest.mark.parametrize("host", HOSTS)
def test_a_rejection_denies_with_the_reviewers_comment(
    host, start_hook, session_id, reviewer: Client
):
    hook = start_hook(host, hook_input(host, session_id))
    breakpoint_id = waiting_on(hook)

    reviewer.release(breakpoint_id, "Not on a Friday", approved=False)

    decision = decision_of(hook.finish())
    assert decision["behavior"] == "deny"
    assert decision["message"].endswith(": Not on a Friday")
    assert "alice" in decision["message"]
    assert breakpoint_id in decision["message"]


def test_an_expired_breakpoint_is_no_decision(start_hook, session_id, admin_token, live):
    hook = start_hook("claude-code", hook_input("claude-code", session_id))
    breakpoint_id = waiting_on(hook)

    with Client(live.base_url, admin_token) as admin:
        admin.expire(breakpoint_id)

    assert no_decision(hook.finish()).startswith(f"bpm hook claude-code: {breakpoint_id} was ")


def test_an_input_too_large_for_a_form_is_attached_to_approve_as_it_is(
    start_hook, session_id, reviewer: Client
):
    """A file of 70,000 characters to write is beyond what a proposal takes (64 KiB): the
    reviewer reads it attached, and approves or rejects it as it is."""
    given = {
        **hook_input("claude-code", session_id),
        "tool_name": "Write",
        "tool_input": {"file_path": "/home/me/project/data.csv", "content": "a,b\n" * 17_500},
    }
    hook = start_hook("claude-code", given)
    breakpoint_id = waiting_on(hook)

    asked = reviewer.get(breakpoint_id)
    assert asked.key == "claude-code.write"
    assert "proposal" not in asked.payload and "form" not in asked.payload
    [attached] = asked.payload["context"]["files"]
    assert json.loads(attached["content"]) == given["tool_input"]
    reviewer.release(breakpoint_id, "fine")

    assert decision_of(hook.finish()) == {"behavior": "allow"}


def test_a_restarted_hook_waits_on_the_breakpoint_it_opened(
    start_hook, session_id, reviewer: Client
):
    """The host stopped (or restarted) while its hook waited; asked again with the same
    ids, the hook finds the breakpoint it opened instead of asking again."""
    given = hook_input("codex", session_id)
    first = start_hook("codex", given)
    breakpoint_id = waiting_on(first)
    first.kill()

    again = start_hook("codex", given)
    assert waiting_on(again) == breakpoint_id
    reviewer.release(breakpoint_id, "go ahead")

    assert decision_of(again.finish()) == {"behavior": "allow"}
    assert [b.breakpoint_id for b in reviewer.list(run_id=session_id)] == [breakpoint_id]


def test_another_session_asks_again(start_hook, session_id, reviewer: Client):
    first = start_hook("claude-code", hook_input("claude-code", session_id))
    other = start_hook("claude-code", hook_input("claude-code", str(uuid.uuid4())))

    assert waiting_on(first) != waiting_on(other)


@pytest.mark.parametrize("host", HOSTS)
def test_a_service_that_is_down_gets_no_decision(host, bpm_env, session_id):
    env = {**bpm_env, "BPM_URL": f"http://127.0.0.1:{free_port()}"}

    done = bpm("hook", host, env=env, stdin=json.dumps(hook_input(host, session_id)))

    assert "cannot reach" in no_decision(done)


def test_a_refused_token_gets_no_decision(bpm_env, session_id):
    env = {**bpm_env, "BPM_TOKEN": "bpm_not_a_token"}

    done = bpm(
        "hook", "claude-code", env=env, stdin=json.dumps(hook_input("claude-code", session_id))
    )

    assert "not_authenticated" in no_decision(done)


def test_a_wait_that_runs_out_gets_no_decision(bpm_env, session_id, reviewer: Client):
    given = json.dumps(hook_input("claude-code", session_id))

    done = bpm("hook", "claude-code", "--timeout", "1", env=bpm_env, stdin=given)

    assert "nobody decided" in no_decision(done)
    [asked] = reviewer.list(run_id=session_id)
    assert asked.status == "waiting"  # the next ask of the same call waits on it again


@pytest.mark.parametrize(
    ("given", "says"),
    [
        ("rm -rf /", "not JSON"),
        ('["Bash"]', "not a JSON object"),
        (
            '{"hook_event_name": "PreToolUse", "tool_name": "Bash", "tool_input": {}}',
            'not "PreToolUse"',
        ),
        ('{"hook_event_name": "PermissionRequest", "tool_input": {}}', "no tool_name"),
        ('{"tool_name": "Bash", "tool_input": "ls"}', "no tool_input"),
        ('{"tool_name": "Bash", "tool_input": {}, "session_id": 7}', "session_id"),
    ],
)
def test_input_that_is_not_a_permission_request_gets_no_decision(bpm_env, given, says):
    done = bpm("hook", "codex", env=bpm_env, stdin=given)

    assert says in no_decision(done)

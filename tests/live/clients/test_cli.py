"""`bpm` as scripts use it: a subprocess, its exit code, stdout and stderr.

Against the live server (tests/clients/conftest.py). While `bpm ask` waits, the test decides
as the reviewer alice, with the SDK or with her own `bpm approve` / `bpm reject`. The id of
the waiting breakpoint comes from `bpm ask`'s progress note on stderr.
"""

import json
import os
import re
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from bpm_client import Client

from tests.live.clients.conftest import BPM, with_default_sigint
from tests.support.cli import DEADLINE, Done, Running, bpm
from tests.support.net import free_port

REPO_ROOT = Path(__file__).resolve().parents[3]


def running_bpm(
    args: list[str], env: dict[str, str], *, cwd: Path | None = None, default_sigint: bool = False
) -> Running:
    """`bpm ARGS` started (with SIGINT's default disposition if `default_sigint`)."""
    command = [BPM, *args]
    if default_sigint:
        command = with_default_sigint(command)
    return Running(command, env, cwd=cwd)


def created_id(running: Running) -> str:
    """The id in `bpm ask`'s note `created bp-..., waiting for a decision`."""
    return running.noted(r"created (\S+), waiting for a decision")


@pytest.fixture
def start() -> Iterator:
    """Start `bpm` in the background; whatever is still running at the end is killed."""
    started: list[Running] = []

    def start(
        *args: str, env: dict[str, str], cwd: Path | None = None, default_sigint: bool = False
    ) -> Running:
        running = running_bpm(list(args), env, cwd=cwd, default_sigint=default_sigint)
        started.append(running)
        return running

    yield start
    for running in started:
        running.kill()


@pytest.fixture
def offline_env() -> dict[str, str]:
    """A token, and BPM_URL on a closed port of 127.0.0.1: nothing answers there."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("BPM_")}
    return {**base, "BPM_URL": f"http://127.0.0.1:{free_port()}", "BPM_TOKEN": "bpm_not_used"}


@pytest.fixture
def reviewer_env(bpm_env, reviewer_token) -> dict[str, str]:
    """`bpm` as the reviewer alice (her personal token)."""
    return {**bpm_env, "BPM_TOKEN": reviewer_token}


def one_error_line(done: Done) -> str:
    """The single `bpm: ...` line a failure writes on stderr (no traceback)."""
    assert "Traceback" not in done.stderr, done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    return lines[0]


# --- without a server ------------------------------------------------------------------


def test_help_names_the_environment_variables_and_exit_codes(offline_env):
    done = bpm("--help", env=offline_env)
    assert done.code == 0
    assert "BPM_URL" in done.stdout and "BPM_TOKEN" in done.stdout
    for code, meaning in [(0, "approved"), (1, "rejected"), (2, "expired or cancelled")]:
        assert re.search(rf"^\s+{code}\s+{meaning}$", done.stdout, re.MULTILINE), done.stdout
    assert re.search(r"^\s+3\s+still waiting", done.stdout, re.MULTILINE)
    assert re.search(r"^\s+4\s+usage, authentication or server error", done.stdout, re.M)


@pytest.mark.parametrize(
    "args",
    [["ask"], ["ask", "Ship?", "--ttl", "soon"], ["ask", "Ship?", "--bogus"], ["nope"]],
    ids=["missing-question", "bad-ttl", "unknown-option", "unknown-command"],
)
def test_a_usage_error_exits_4_not_2(offline_env, args):
    done = bpm(*args, env=offline_env)
    assert done.code == 4
    assert done.stdout == ""
    assert "Error:" in done.stderr and "Traceback" not in done.stderr


def test_an_unreachable_server_is_one_line_and_exit_4(offline_env):
    done = bpm("ask", "Deploy?", env=offline_env)
    assert done.code == 4
    assert one_error_line(done).startswith(f"bpm: error: cannot reach {offline_env['BPM_URL']}/")
    assert done.stdout == ""


def test_a_missing_file_is_one_line_and_exit_4(offline_env, tmp_path):
    done = bpm("ask", "Deploy?", "--file", "plan.md", env=offline_env, cwd=tmp_path)
    assert done.code == 4
    assert one_error_line(done) == "bpm: error: no such file: plan.md"


def test_no_token_is_one_line_and_exit_4(offline_env):
    env = {k: v for k, v in offline_env.items() if k != "BPM_TOKEN"}
    done = bpm("status", "bp-1", env=env)
    assert done.code == 4
    assert one_error_line(done).startswith("bpm: error: no API token: ")


@pytest.mark.parametrize("command", ["mcp", "gateway"])
def test_bpm_mcp_without_the_mcp_sdk_says_how_to_install_it(offline_env, tmp_path, command):
    """An importable `mcp` that fails as a missing one does: the extra is not installed.
    The command hinted works in the environment that runs bpm (make run's `.venv` has no
    pip: uv made it): the same command with `show` finds bpm-client installed there."""
    (tmp_path / "mcp").mkdir()
    (tmp_path / "mcp" / "__init__.py").write_text(
        "raise ModuleNotFoundError(\"No module named 'mcp'\", name='mcp')\n"
    )
    path = os.pathsep.join(filter(None, [str(tmp_path), offline_env.get("PYTHONPATH")]))
    args = [command] if command == "mcp" else [command, "--", "true"]
    done = bpm(*args, env={**offline_env, "PYTHONPATH": path}, cwd=REPO_ROOT)
    assert done.code == 4
    line = one_error_line(done)
    prefix = f"bpm: error: bpm {command} needs the MCP SDK: "
    suffix = " './clients/python[mcp]' (in the project's folder)"  # on no index
    assert line.startswith(prefix) and line.endswith(suffix), line
    installer, options = line.removeprefix(prefix).removesuffix(suffix).split(" install")
    assert options == "" or options.startswith(" --python "), line
    shown = subprocess.run(
        [*installer.split(), "show", *options.split(), "bpm-client"],
        cwd=REPO_ROOT,
        env=offline_env,
        capture_output=True,
        text=True,
        timeout=DEADLINE,
    )
    assert shown.returncode == 0, (line, shown.stderr)
    assert "Name: bpm-client" in shown.stdout


def test_reject_needs_a_message(offline_env):
    done = bpm("reject", "bp-anything", env=offline_env)
    assert done.code == 4
    assert "Missing option '-m'" in done.stderr


# --- bpm ask against the live server ---------------------------------------------------


def test_ask_approved_exits_0_with_the_result_as_json(bpm_env, reviewer: Client, start, tmp_path):
    """The reviewer reads the plan sent with --file, approves; stdout holds the result."""
    (tmp_path / "plan.md").write_text("# Plan\n- migrate\n- deploy\n")
    asking = start(
        "ask",
        "Deploy?",
        "--file",
        "plan.md",
        "--tag",
        "deploy",
        "--json",
        env=bpm_env,
        cwd=tmp_path,
    )
    breakpoint_id = created_id(asking)
    assert breakpoint_id in [b.breakpoint_id for b in reviewer.list(status="waiting")]
    files = reviewer.get(breakpoint_id).payload["context"]["files"]
    assert [(f["path"], f["content"]) for f in files] == [
        ("plan.md", "# Plan\n- migrate\n- deploy\n")
    ]
    reviewer.release(breakpoint_id, "go ahead")
    done = asking.finish()
    assert done.code == 0, done.stderr
    result = json.loads(done.stdout)  # stdout holds the JSON only; notes went to stderr
    assert result["breakpointId"] == breakpoint_id
    assert result["status"] == "released"
    assert result["approved"] is True
    assert result["respondedBy"] == "alice"
    assert result["feedback"] == "go ahead"


def test_ask_rejected_by_the_reviewers_bpm_reject_exits_1(bpm_env, reviewer_env, start):
    asking = start("ask", "Drop the old table?", env=bpm_env)
    breakpoint_id = created_id(asking)
    rejecting = bpm("reject", breakpoint_id, "-m", "not on a Friday", env=reviewer_env)
    assert rejecting.code == 0, rejecting.stderr
    assert rejecting.stdout == 'rejected by alice: "not on a Friday"\n'
    done = asking.finish()
    assert done.code == 1, done.stderr
    assert done.stdout == 'rejected by alice: "not on a Friday"\n'


def test_ask_with_options_returns_the_option_chosen(bpm_env, reviewer_env, start):
    asking = start(
        "ask", "Which region?", "--option", "eu", "--option", "us", "--json", env=bpm_env
    )
    breakpoint_id = created_id(asking)
    approving = bpm("approve", breakpoint_id, "--option", "us", "-m", "closer", env=reviewer_env)
    assert approving.code == 0, approving.stderr
    assert approving.stdout == 'approved by alice (option "us"): "closer"\n'
    done = asking.finish()
    assert done.code == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["option"] == "us" and result["approved"] is True


def test_ask_that_expires_exits_2(bpm_env, start):
    done = start("ask", "Anyone there?", "--ttl", "2", env=bpm_env).finish()
    assert done.code == 2, done.stderr
    assert done.stdout.startswith("expired")


def test_ask_cancelled_by_bpm_cancel_exits_2(bpm_env, start):
    asking = start("ask", "Deploy?", env=bpm_env)
    breakpoint_id = created_id(asking)
    cancelling = bpm("cancel", breakpoint_id, "--reason", "superseded", env=bpm_env)
    assert cancelling.code == 0, cancelling.stderr
    assert cancelling.stdout == "cancelled\n"
    done = asking.finish()
    assert done.code == 2, done.stderr
    assert done.stdout.startswith("cancelled")


def test_wait_with_a_timeout_on_a_waiting_breakpoint_exits_3(bpm_env):
    created = bpm("create", "Deploy?", env=bpm_env)
    assert created.code == 0, created.stderr
    breakpoint_id = created.stdout.strip()
    done = bpm("wait", breakpoint_id, "--timeout", "2", env=bpm_env)
    assert done.code == 3, done.stderr
    assert done.stdout == ""
    assert f"still waiting after 2 s: {breakpoint_id}" in done.stderr
    assert bpm("status", breakpoint_id, env=bpm_env).stdout == "waiting\n"


@pytest.mark.own_system
def test_ask_survives_a_server_restart_while_waiting(live, bpm_env, reviewer_env, start):
    asking = start("ask", "Deploy during the restart?", env=bpm_env)
    breakpoint_id = created_id(asking)
    live.restart_web(down_seconds=3)
    approving = bpm("approve", breakpoint_id, "-m", "still fine", env=reviewer_env)
    assert approving.code == 0, approving.stderr
    done = asking.finish()
    assert done.code == 0, done.stderr
    assert done.stdout == 'approved by alice: "still fine"\n'


def test_a_bad_token_is_one_line_and_exit_4(bpm_env):
    done = bpm("ask", "Deploy?", env={**bpm_env, "BPM_TOKEN": "bpm_not-a-real-token"})
    assert done.code == 4
    assert one_error_line(done).startswith("bpm: error: not_authenticated: ")
    assert done.stdout == ""


# --- the other commands ----------------------------------------------------------------


def test_an_idempotency_key_asks_once(bpm_env, reviewer_env, start):
    """The same key and question again (a retried step) get the first breakpoint; `bpm ask`
    with that key waits on it; another question under the key is refused."""
    key = ["--idempotency-key", "ci-run-41-step-3"]
    first = bpm("create", "Deploy?", *key, env=bpm_env)
    again = bpm("create", "Deploy?", *key, env=bpm_env)
    assert first.code == again.code == 0, first.stderr + again.stderr
    breakpoint_id = first.stdout.strip()
    assert again.stdout.strip() == breakpoint_id

    asking = start("ask", "Deploy?", *key, env=bpm_env)
    assert created_id(asking) == breakpoint_id
    assert bpm("approve", breakpoint_id, "-m", "Once", env=reviewer_env).code == 0
    assert asking.finish().code == 0

    other = bpm("create", "Drop the table?", *key, env=bpm_env)
    assert other.code == 4
    assert "idempotency_conflict" in other.stderr
    assert len(json.loads(bpm("list", "--json", env=bpm_env).stdout)) == 1


def test_list_prints_a_table_or_json(bpm_env):
    deploy = bpm("create", "Deploy A?", "--title", "Deploy A", "--tag", "deploy", env=bpm_env)
    other = bpm("create", "Drop the table?", "--tag", "db", env=bpm_env)
    deploy_id, other_id = deploy.stdout.strip(), other.stdout.strip()

    table = bpm("list", "--tag", "deploy", env=bpm_env)
    assert table.code == 0, table.stderr
    header, *rows = table.stdout.splitlines()
    assert re.split(r"\s{2,}", header) == ["ID", "OUTCOME", "DECIDED BY", "CREATED", "TITLE"]
    assert len(rows) == 1
    assert rows[0].startswith(deploy_id) and rows[0].endswith("Deploy A")
    assert " waiting " in rows[0]

    listed = bpm("list", "--status", "waiting", "--json", env=bpm_env)
    assert listed.code == 0, listed.stderr
    found = json.loads(listed.stdout)
    assert [b["breakpointId"] for b in found] == [other_id, deploy_id]  # newest first
    assert found[0]["question"] == "Drop the table?" and found[0]["tags"] == ["db"]


def test_list_shows_what_became_of_each_and_who_decided(bpm_env, reviewer_env):
    """A released breakpoint reads approved or rejected (with the option chosen), next to
    who decided; `--json` keeps the API's own status and result."""
    ids = {}
    for title, extra in [
        ("Region", ["--option", "eu", "--option", "us"]),
        ("Drop", []),
        ("Old", []),
        ("Later", []),
    ]:
        created = bpm("create", f"{title}?", "--title", title, *extra, env=bpm_env)
        assert created.code == 0, created.stderr
        ids[title] = created.stdout.strip()
    approving = ("approve", ids["Region"], "--option", "us", "-m", "closer")
    assert bpm(*approving, env=reviewer_env).code == 0
    assert bpm("reject", ids["Drop"], "-m", "not today", env=reviewer_env).code == 0
    assert bpm("cancel", ids["Old"], env=bpm_env).code == 0

    listed = bpm("list", env=bpm_env)

    assert listed.code == 0, listed.stderr
    header, *rows = (re.split(r"\s{2,}", line) for line in listed.stdout.splitlines())
    assert header == ["ID", "OUTCOME", "DECIDED BY", "CREATED", "TITLE"]
    shown = {row[-1]: (row[0], row[1], row[2]) for row in rows}
    assert shown == {
        "Later": (ids["Later"], "waiting", "-"),
        "Old": (ids["Old"], "cancelled", "agent:agent-a"),
        "Drop": (ids["Drop"], "rejected", "alice"),
        "Region": (ids["Region"], 'approved (option "us")', "alice"),
    }
    as_json = json.loads(bpm("list", "--json", env=bpm_env).stdout)
    by_title = {item["title"]: item for item in as_json}
    assert by_title["Drop"]["status"] == by_title["Region"]["status"] == "released"
    assert by_title["Drop"]["result"]["approved"] is False
    assert by_title["Region"]["result"]["respondedBy"] == "alice"
    assert by_title["Region"]["result"]["option"] == "us"


def test_status_and_events_follow_a_decision(bpm_env, reviewer: Client):
    breakpoint_id = bpm("create", "Deploy?", env=bpm_env).stdout.strip()
    assert bpm("status", breakpoint_id, env=bpm_env).stdout == "waiting\n"
    reviewer.release(breakpoint_id, "ok")

    status = bpm("status", breakpoint_id, env=bpm_env)
    assert status.code == 0, status.stderr
    assert status.stdout == 'approved by alice: "ok"\n'
    as_json = json.loads(bpm("status", breakpoint_id, "--json", env=bpm_env).stdout)
    assert as_json["status"] == "released" and as_json["result"]["respondedBy"] == "alice"

    events = bpm("events", breakpoint_id, env=bpm_env)
    assert events.code == 0, events.stderr
    types = [line.split("  ")[1] for line in events.stdout.splitlines()]
    assert types[0] == "created" and "released" in types


# --- Ctrl-C ----------------------------------------------------------------------------


def test_ctrl_c_leaves_the_breakpoint_waiting(bpm_env, agent: Client, start):
    asking = start("ask", "Deploy?", env=bpm_env, default_sigint=True)
    breakpoint_id = created_id(asking)
    asking.process.send_signal(signal.SIGINT)
    done = asking.finish()
    assert done.code == 130
    assert f"{breakpoint_id} is still waiting" in done.stderr
    assert "Traceback" not in done.stderr
    assert agent.status(breakpoint_id).status == "waiting"


def test_ctrl_c_with_cancel_on_interrupt_cancels_it(bpm_env, agent: Client, start):
    asking = start("ask", "Deploy?", "--cancel-on-interrupt", env=bpm_env, default_sigint=True)
    breakpoint_id = created_id(asking)
    asking.process.send_signal(signal.SIGINT)
    done = asking.finish()
    assert done.code == 130
    assert f"cancelled {breakpoint_id}" in done.stderr
    assert agent.status(breakpoint_id).status == "cancelled"

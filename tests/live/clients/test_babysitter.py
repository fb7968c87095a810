"""`bpm babysitter watch` against the real, unmodified babysitter SDK and a live server.

The SDK is the npm package pinned in tests/live/clients/babysitter (package.json and its
lockfile; `npm ci` installs it there when node_modules is missing, as .ci/run does). Each
test writes a small process into a temporary project, starts a run with the SDK's own CLI
(`babysitter run:create`), runs the bridge as a subprocess (`bpm babysitter watch`), decides
as reviewers through the API, and reads what the process received from the run itself
(`state/output.json`, written by the SDK when the process returns).
"""

import json
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from bpm_client import Breakpoint, Client

from accounts.tokens import token_create_for_user
from tests.live.clients.conftest import BPM
from tests.support.factories import ReviewerFactory

FIXTURE = Path(__file__).resolve().parent / "babysitter"
BABYSITTER = FIXTURE / "node_modules" / ".bin" / "babysitter"
NPM_CI = ["npm", "ci", "--ignore-scripts", "--omit=optional", "--no-audit", "--no-fund"]
# Guards, not assertions: no step of a test may hang.
STEP_SECONDS = 120
INSTALL_SECONDS = 900

PLAN = "# Plan\n\n1. Migrate the schema\n2. Deploy\n"
APP = 'print("hello")\n'
SECRET = "a token of the agent's machine, outside the project\n"
# Two breakpoints at once (ctx.parallel.all): one with context files (two of them lead out
# of the project: a symlink and a ../ path), an expert, tags and a key in its payload; one
# with only a question, its label, expert-less tags in options.
PROCESS = """\
export async function process(inputs, ctx) {
  const [deploy, drop] = await ctx.parallel.all([
    () => ctx.breakpoint({
      question: "Deploy the plan?",
      title: "Deploy plan",
      breakpointId: "deploy.plan",
      context: {
        files: [
          { path: "docs/plan.md", format: "markdown" },
          { path: "src/app.py" },
          { path: "docs/notes.md" },
          { path: "../secret.txt" },
        ],
      },
      expert: "ops",
      tags: ["deploy"],
    }),
    () => ctx.breakpoint({ question: "Drop the legacy table?" }, { label: "drop-table", tags: ["db"] }),
  ]);
  return { deploy, drop };
}
"""


@pytest.fixture(scope="session")
def babysitter_bin() -> Path:
    """The SDK's CLI, installed from the lockfile when it is not there yet."""
    if not BABYSITTER.exists():
        assert shutil.which("npm"), "node and npm are needed: the test runs the babysitter SDK"
        done = subprocess.run(
            NPM_CI, cwd=FIXTURE, capture_output=True, text=True, timeout=INSTALL_SECONDS
        )
        assert done.returncode == 0, done.stderr[-3000:]
    return BABYSITTER


class Run:
    """A babysitter run in a temporary project, driven with the SDK's CLI."""

    def __init__(self, babysitter: Path, project: Path):
        self.babysitter = babysitter
        self.project = project
        created = self.cli("run:create", "--process-id", "bpm-test", "--entry", "./process.mjs")
        self.run_id: str = created["runId"]
        self.path = Path(created["runDir"])

    def cli(self, *args: str, stdin: str | None = None) -> Any:
        done = subprocess.run(
            [str(self.babysitter), *args, "--json"],
            cwd=self.project,
            input=stdin,
            capture_output=True,
            text=True,
            timeout=STEP_SECONDS,
        )
        assert done.returncode == 0, f"babysitter {args[0]}: {done.stderr}"
        return json.loads(done.stdout)

    def iterate(self) -> dict[str, Any]:
        return self.cli("run:iterate", str(self.path))

    def pending(self) -> list[str]:
        listed = self.cli("task:list", str(self.path), "--pending", "--kind", "breakpoint")
        return [task["effectId"] for task in listed["tasks"]]

    def post(self, effect_id: str, value: dict[str, Any]) -> None:
        args = ["task:post", str(self.path), effect_id, "--status", "ok", "--value", "-"]
        self.cli(*args, stdin=json.dumps(value))

    def output(self) -> dict[str, Any]:
        return json.loads((self.path / "state" / "output.json").read_text())


class Watch:
    """`bpm babysitter watch` in the background; its progress notes go to a file."""

    def __init__(
        self, project: Path, babysitter: Path, env: dict[str, str], *options: str, interval=1
    ):
        self.log = project.parent / f"watch-{time.monotonic_ns()}.log"
        command = [BPM, "babysitter", "watch", str(project), "--babysitter", str(babysitter)]
        with self.log.open("w") as log:
            self.process = subprocess.Popen(
                [*command, "--interval", str(interval), *options], env=env, stdout=log, stderr=log
            )

    def notes(self) -> str:
        return self.log.read_text()

    def finish(self) -> int:
        return self.process.wait(timeout=STEP_SECONDS)

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=STEP_SECONDS)


@pytest.fixture
def project(tmp_path) -> Path:
    root = tmp_path / "project"
    (root / "docs").mkdir(parents=True)
    (root / "src").mkdir()
    (root / "docs" / "plan.md").write_text(PLAN)
    (root / "src" / "app.py").write_text(APP)
    (root / "process.mjs").write_text(PROCESS)
    (tmp_path / "secret.txt").write_text(SECRET)
    (root / "docs" / "notes.md").symlink_to(tmp_path / "secret.txt")
    return root


@pytest.fixture
def watches() -> Iterator[list[Watch]]:
    """Every watch a test starts; whatever still runs at the end is killed."""
    started: list[Watch] = []
    yield started
    for watch in started:
        watch.kill()


@pytest.fixture
def start_watch(project, babysitter_bin, bpm_env, watches):
    def start(*options: str, interval: float = 1) -> Watch:
        watch = Watch(project, babysitter_bin, bpm_env, *options, interval=interval)
        watches.append(watch)
        return watch

    return start


@pytest.fixture
def ops(live) -> Iterator[Client]:
    """Olga, a reviewer in the expert group `ops`."""
    token = token_create_for_user(user=ReviewerFactory(username="olga", groups=["ops"]))[1]
    with Client(live.base_url, token, strict=True) as client:
        yield client


@pytest.fixture
def admin(live, admin_token) -> Iterator[Client]:
    with Client(live.base_url, admin_token, strict=True) as client:
        yield client


def asked(reviewer: Client, count: int, live, watch: Watch) -> dict[str, Breakpoint]:
    """The bridge's breakpoints, by key, once there are `count` of them."""

    def found() -> dict[str, Breakpoint] | None:
        if watch.process.poll() is not None:
            pytest.fail(f"the watch ended early ({watch.process.returncode}):\n{watch.notes()}")
        listed = {b.key: b for b in reviewer.list(tags=["babysitter"])}
        return listed if len(listed) >= count else None

    return live.wait_until(found, what=f"{count} breakpoints from the bridge", timeout=STEP_SECONDS)


def expected_value(breakpoint: Breakpoint) -> dict[str, Any]:
    """What the process should receive for a decided breakpoint: the API's result as it is,
    with `status` and `breakpointId`."""
    assert breakpoint.result is not None
    value = {k: v for k, v in breakpoint.result.to_json().items() if v is not None}
    return {**value, "status": breakpoint.status, "breakpointId": breakpoint.breakpoint_id}


def left_out(path: str, reason: str) -> str:
    return f"[bpm babysitter left out {path}: {reason}. Nothing of it was sent.]"


def test_a_headless_run_is_answered_through_the_service_end_to_end(
    live, project, babysitter_bin, start_watch, ops, reviewer
):
    """--drive: the run starts, both questions are asked at once (with the plan's text; the
    files outside the project left out, each saying so), a reviewer approves one and
    rejects the other, the run completes with both answers."""
    run = Run(babysitter_bin, project)
    watch = start_watch("--drive")
    found = asked(reviewer, 2, live, watch)
    deploy, drop = found["deploy.plan"], found["drop-table"]

    effects = set(run.pending())
    assert len(effects) == 2
    files = deploy.payload["context"]["files"]
    outside = "it is outside the project directory (symlinks followed)"
    assert files == [
        {"path": "docs/plan.md", "format": "markdown", "content": PLAN},
        {"path": "src/app.py", "content": APP},
        {"path": "docs/notes.md", "format": "text", "content": left_out("docs/notes.md", outside)},
        {"path": "secret.txt", "format": "text", "content": left_out("../secret.txt", outside)},
    ]
    assert deploy.question == "Deploy the plan?" and deploy.title == "Deploy plan"
    assert [expert.name for expert in deploy.experts] == ["ops"]
    assert deploy.run_id == drop.run_id == run.run_id
    assert drop.question == "Drop the legacy table?" and drop.title == "drop-table"
    assert deploy.tags[:2] == ["deploy", "babysitter"] and drop.tags[:2] == ["db", "babysitter"]
    assert {deploy.tags[2], drop.tags[2]} == effects  # each names its effect

    ops.release(deploy.breakpoint_id, "Ship it")
    reviewer.release(drop.breakpoint_id, "Not before the backup", approved=False)
    assert watch.finish() == 0, watch.notes()

    output = run.output()
    assert output["deploy"]["approved"] is True and output["deploy"]["feedback"] == "Ship it"
    assert output["drop"]["approved"] is False
    assert output["drop"]["feedback"] == "Not before the backup"
    assert output["deploy"] == expected_value(reviewer.get(deploy.breakpoint_id))
    assert output["drop"] == expected_value(reviewer.get(drop.breakpoint_id))
    assert run.iterate()["status"] == "completed"


def test_a_restarted_bridge_finds_its_breakpoints_and_asks_nothing_twice(
    live, project, babysitter_bin, start_watch, ops, admin
):
    """Killed (SIGKILL) after it asked, a bridge started again takes the same breakpoints
    back; an expiry here reaches the run as a rejection that says why."""
    run = Run(babysitter_bin, project)
    run.iterate()
    first = start_watch()
    found = asked(admin, 2, live, first)
    first.kill()

    again = start_watch("--once")
    live.wait_until(lambda: again.notes().count("still asks") == 2, what="the bridge to recover")
    ops.release(found["deploy.plan"].breakpoint_id, "Go")
    admin.expire(found["drop-table"].breakpoint_id)
    assert again.finish() == 0, again.notes()

    everything = list(admin.list(tags=["babysitter"]))
    assert sorted(b.breakpoint_id for b in everything) == sorted(
        b.breakpoint_id for b in found.values()
    )
    assert "asked " not in again.notes()  # it created nothing
    assert run.pending() == []
    assert run.iterate()["status"] == "completed"
    output = run.output()
    assert output["deploy"]["approved"] is True and output["deploy"]["feedback"] == "Go"
    expired = admin.get(found["drop-table"].breakpoint_id)
    assert expired.status == "expired"
    assert output["drop"] == expected_value(expired)
    assert output["drop"]["approved"] is False and output["drop"]["feedback"]


def test_an_effect_answered_in_the_run_first_is_cancelled_here(
    live, project, babysitter_bin, start_watch, reviewer, agent
):
    """The agent's chat answers one breakpoint (task:post by hand): the bridge cancels its
    question here and the chat's answer stands. A cancellation here answers the other."""
    run = Run(babysitter_bin, project)
    run.iterate()
    watch = start_watch()
    found = asked(reviewer, 2, live, watch)
    deploy, drop = found["deploy.plan"], found["drop-table"]
    drop_effect = next(tag for tag in drop.tags if tag not in ("db", "babysitter"))

    run.post(drop_effect, {"approved": True, "response": "Fine, said in chat"})
    cancelled = live.wait_until(
        lambda: (b := reviewer.get(drop.breakpoint_id)).status == "cancelled" and b,
        what="the bridge to cancel the breakpoint answered in the run",
    )
    assert cancelled.result is not None
    assert cancelled.result.feedback == "answered in the babysitter run first"

    agent.cancel(deploy.breakpoint_id, reason="Superseded by plan B")
    live.wait_until(lambda: run.pending() == [], what="the bridge to answer the run")
    watch.kill()
    assert run.iterate()["status"] == "completed"
    output = run.output()
    assert output["drop"] == {"approved": True, "response": "Fine, said in chat"}
    assert output["deploy"]["approved"] is False
    assert output["deploy"]["feedback"] == "Superseded by plan B"
    assert output["deploy"]["status"] == "cancelled"


@pytest.mark.own_system
def test_the_bridge_survives_a_server_restart_while_waiting(
    live, project, babysitter_bin, start_watch, ops, reviewer
):
    """The web server goes away for 3 s while the bridge waits (in a 30 s long-poll: cut
    off); the decisions made after it is back still reach the run."""
    run = Run(babysitter_bin, project)
    watch = start_watch("--drive", interval=30)
    found = asked(reviewer, 2, live, watch)
    live.restart_web(down_seconds=3)
    ops.release(found["deploy.plan"].breakpoint_id, "After the restart")
    reviewer.release(found["drop-table"].breakpoint_id, "No", approved=False)
    assert watch.finish() == 0, watch.notes()
    output = run.output()
    assert output["deploy"]["feedback"] == "After the restart"
    assert output["drop"]["approved"] is False
    assert len(list(reviewer.list(tags=["babysitter"]))) == 2


# A form and a proposal in the payload: the SDK's breakpoint task keeps the payload whole
# (its `options` reach the task only as label/expert/tags/strategy).
FORM_PROCESS = """\
export async function process(inputs, ctx) {
  const scale = await ctx.breakpoint({
    question: "Scale the web tier?",
    form: {
      type: "object",
      properties: {
        replicas: { type: "integer", title: "Replicas", minimum: 1, maximum: 10 },
        region: { type: "string", enum: ["eu-west-1", "us-east-1"] },
      },
      required: ["replicas", "region"],
    },
    proposal: { replicas: 3, region: "eu-west-1" },
  }, { label: "scale" });
  return { scale };
}
"""


def test_a_form_is_asked_and_the_edited_values_reach_the_run(
    live, project, babysitter_bin, start_watch, reviewer
):
    """The process's form and proposal reach the breakpoint; the reviewer approves with
    edited values; the run's process receives them (`values`, `edited`) in its result."""
    (project / "process.mjs").write_text(FORM_PROCESS)
    run = Run(babysitter_bin, project)
    watch = start_watch("--drive")
    scale = asked(reviewer, 1, live, watch)["scale"]
    assert scale.payload["proposal"] == {"replicas": 3, "region": "eu-west-1"}
    assert scale.payload["form"]["required"] == ["replicas", "region"]

    edited = {"replicas": 5, "region": "eu-west-1"}
    reviewer.release(scale.breakpoint_id, "Five, not three", values=edited)
    assert watch.finish() == 0, watch.notes()

    output = run.output()["scale"]
    assert (output["approved"], output["values"], output["edited"]) == (True, edited, True)
    decided = reviewer.get(scale.breakpoint_id)
    assert output == expected_value(decided)
    claims = reviewer.verify(decided.result, breakpoint_id=scale.breakpoint_id)
    digest = claims["valuesDigest"]  # the receipt binds the edited values
    assert digest and output["valuesDigest"] == digest
    assert run.iterate()["status"] == "completed"

"""babysitter's runs as the bridge sees them: run folders, pending breakpoint effects, and
the SDK's own CLI (`babysitter task:list`, `task:post`, `run:iterate`) to read and answer them.

Only the CLI writes to a run (it holds the run's lock and appends to its journal); this
module reads run.json, task.json and the journal's last event, which the SDK never rewrites.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shlex
import shutil
import subprocess
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ..errors import BpmError, ConfigurationError

RUNS_DIR_VARIABLE = "BABYSITTER_RUNS_DIR"
# The journal events after which a run takes no more answers.
FINAL_EVENTS = {"RUN_COMPLETED": "completed", "RUN_FAILED": "failed"}
LOCK_HELD = "run.lock already held"
NOT_REQUESTED = "is not requested"
NOT_FOUND_HINT = (
    "babysitter not found: install the SDK in the project (npm install "
    "@a5c-ai/babysitter-sdk) or pass --babysitter (the command to run)"
)


class BabysitterFailed(BpmError):
    """A `babysitter` command failed (its stderr says why)."""


@dataclasses.dataclass(frozen=True)
class Run:
    """One run folder (`.a5c/runs/<runId>`)."""

    run_id: str
    path: Path

    def state(self) -> str | None:
        """'completed' or 'failed' once the journal says so; None while the run goes on."""
        journal = self.path / "journal"
        try:
            last = max(journal.glob("*.json"), default=None)
            event = json.loads(last.read_text(encoding="utf-8")) if last else {}
        except (OSError, ValueError):
            return None
        return FINAL_EVENTS.get(str(event.get("type"))) if isinstance(event, dict) else None

    def task(self, effect_id: str) -> dict[str, Any] | None:
        """The effect's task.json, or None when this run has no such effect."""
        try:
            data = json.loads((self.path / "tasks" / effect_id / "task.json").read_text("utf-8"))
        except (OSError, ValueError):
            return None
        return data if isinstance(data, dict) else None


@dataclasses.dataclass(frozen=True)
class Effect:
    """A breakpoint effect of a run: `ctx.breakpoint(...)` waiting for its result."""

    run: Run
    effect_id: str
    invocation_key: str
    task: Mapping[str, Any]

    @classmethod
    def of(cls, run: Run, task: Mapping[str, Any]) -> Effect:
        return cls(run, str(task["effectId"]), str(task.get("invocationKey") or ""), task)

    @property
    def metadata(self) -> Mapping[str, Any]:
        metadata = self.task.get("metadata")
        return metadata if isinstance(metadata, Mapping) else {}


def runs_dir_of(project_dir: Path, runs_dir: str | os.PathLike[str] | None = None) -> Path:
    """Where the project's runs are: `runs_dir`, else $BABYSITTER_RUNS_DIR, else .a5c/runs."""
    chosen = runs_dir or os.environ.get(RUNS_DIR_VARIABLE)
    return Path(chosen).resolve() if chosen else (project_dir / ".a5c" / "runs").resolve()


def find_runs(runs_dir: Path, run_ids: Sequence[str] = ()) -> list[Run]:
    """The runs under `runs_dir` (only `run_ids` when given), oldest first."""
    if not runs_dir.is_dir():
        return []
    runs = []
    for path in sorted(p for p in runs_dir.iterdir() if (p / "run.json").is_file()):
        try:
            meta = json.loads((path / "run.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        run_id = str(meta.get("runId") or path.name) if isinstance(meta, dict) else path.name
        if not run_ids or run_id in run_ids:
            runs.append(Run(run_id, path))
    return runs


class Babysitter:
    """The SDK's CLI: `command` is how to start it (e.g. node_modules/.bin/babysitter).

    Every call is bounded by `timeout` seconds; a post that finds the run locked (the run
    is being iterated) is tried again for up to `lock_wait` seconds.
    """

    def __init__(
        self, command: Sequence[str], *, cwd: Path, timeout: float = 120.0, lock_wait: float = 60
    ):
        self.command = list(command)
        self.cwd = cwd
        self.timeout = timeout
        self.lock_wait = lock_wait

    @classmethod
    def locate(cls, project_dir: Path, explicit: str | None = None) -> Babysitter:
        """The given command, else the project's node_modules/.bin/babysitter, else PATH's."""
        if explicit:
            return cls(shlex.split(explicit), cwd=project_dir)
        local = project_dir / "node_modules" / ".bin" / "babysitter"
        found = str(local) if local.exists() else shutil.which("babysitter")
        if not found:
            raise ConfigurationError(NOT_FOUND_HINT)
        return cls([found], cwd=project_dir)

    def _run(self, args: list[str], stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        try:
            return subprocess.run(
                [*self.command, *args],
                cwd=self.cwd,
                input=stdin,
                capture_output=True,
                text=True,
                timeout=self.timeout,
            )
        except FileNotFoundError:
            raise ConfigurationError(f"{NOT_FOUND_HINT} ({self.command[0]} is missing)") from None
        except subprocess.TimeoutExpired:
            raise BabysitterFailed(f"babysitter {args[0]} took over {self.timeout:g} s") from None

    def _json(self, args: list[str]) -> Any:
        done = self._run([*args, "--json"])
        if done.returncode != 0:
            raise BabysitterFailed(_failure(args[0], done))
        try:
            return json.loads(done.stdout)
        except ValueError:
            raise BabysitterFailed(f"babysitter {args[0]}: the answer is not JSON") from None

    def pending_breakpoints(self, run: Run) -> list[Effect]:
        """The run's breakpoint effects still waiting for a result, in effect order."""
        listed = self._json(["task:list", str(run.path), "--pending", "--kind", "breakpoint"])
        effects = []
        for entry in listed.get("tasks") or []:
            task = run.task(str(entry.get("effectId")))
            if task is not None:
                effects.append(Effect.of(run, task))
        return effects

    def post(self, effect: Effect, value: Mapping[str, Any]) -> bool:
        """Post `value` as the effect's result (`--status ok`, always: an error would fail
        the whole run). False when the effect was no longer waiting: the first answer stands."""
        args = ["task:post", str(effect.run.path), effect.effect_id, "--status", "ok"]
        args += ["--value", "-", "--json"]
        if effect.invocation_key:
            args += ["--invocation-key", effect.invocation_key]
        deadline = time.monotonic() + self.lock_wait
        while True:
            done = self._run(args, stdin=json.dumps(value))
            if done.returncode == 0:
                return True
            if NOT_REQUESTED in done.stderr:
                return False
            if LOCK_HELD not in done.stderr or time.monotonic() >= deadline:
                raise BabysitterFailed(_failure("task:post", done))
            time.sleep(0.5)

    def iterate(self, run: Run) -> dict[str, Any]:
        """One `run:iterate`: the process replays and stops at what it waits for."""
        answer = self._json(["run:iterate", str(run.path)])
        return answer if isinstance(answer, dict) else {}


def _failure(command: str, done: subprocess.CompletedProcess[str]) -> str:
    text = " ".join((done.stderr.strip() or done.stdout.strip()).split())
    return f"babysitter {command} exited {done.returncode}: {text[:500]}"

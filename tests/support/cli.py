"""The agent CLI (`bpm`) run to the end in a subprocess, with a deadline."""

import subprocess
from dataclasses import dataclass
from pathlib import Path

from tests.live.clients.conftest import BPM

# Seconds a `bpm` subprocess may take before the test fails (a guard, not an assertion).
DEADLINE = 60


@dataclass
class Done:
    code: int
    stdout: str
    stderr: str


def bpm(*args: str, env: dict[str, str], cwd: Path | None = None, stdin: str | None = None) -> Done:
    """Run `bpm ARGS` to the end (`stdin`: the text on its standard input)."""
    finished = subprocess.run(
        [BPM, *args],
        env=env,
        cwd=cwd,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=DEADLINE,
    )
    return Done(finished.returncode, finished.stdout, finished.stderr)

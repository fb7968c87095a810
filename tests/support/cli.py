"""The agent CLI (`bpm`) in a subprocess: run to the end with a deadline, or left running
while the test decides (its stderr read line by line)."""

import queue
import re
import subprocess
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import pytest

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


class Running:
    """A `bpm` still running (`bpm ask` or `bpm hook` waiting); stderr is read line by line."""

    def __init__(
        self,
        command: list[str],
        env: dict[str, str],
        *,
        cwd: Path | None = None,
        stdin: str | None = None,
    ):
        self.process = subprocess.Popen(
            command,
            env=env,
            cwd=cwd,
            stdin=subprocess.PIPE if stdin is not None else None,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        if stdin is not None:
            assert self.process.stdin is not None
            self.process.stdin.write(stdin)
            self.process.stdin.close()
        self.notes: queue.Queue[str | None] = queue.Queue()
        self._stdout: list[str] = []
        self._stderr: list[str] = []
        self._readers = [
            threading.Thread(target=self._read, args=(self.process.stdout, self._stdout, None)),
            threading.Thread(
                target=self._read, args=(self.process.stderr, self._stderr, self.notes)
            ),
        ]
        for reader in self._readers:
            reader.start()

    @staticmethod
    def _read(stream: IO[str], lines: list[str], notes: queue.Queue | None) -> None:
        for line in stream:
            lines.append(line)
            if notes is not None:
                notes.put(line)
        if notes is not None:
            notes.put(None)

    def noted(self, pattern: str) -> str:
        """The first group of the first stderr line `pattern` matches (from its start); the
        test fails if the process ends first."""
        while True:
            line = self.notes.get(timeout=DEADLINE)
            if line is None:
                pytest.fail(f"bpm ended before it noted {pattern!r}: {''.join(self._stderr)}")
            if match := re.match(pattern, line):
                return match.group(1)

    def finish(self) -> Done:
        code = self.process.wait(timeout=DEADLINE)
        for reader in self._readers:
            reader.join(timeout=DEADLINE)
        return Done(code, "".join(self._stdout), "".join(self._stderr))

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=DEADLINE)
        for reader in self._readers:
            reader.join(timeout=DEADLINE)

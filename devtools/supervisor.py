"""`make run`: start the processes of a Procfile together and stop them together.

Usage: ``python -m devtools.supervisor [Procfile]`` (default ``Procfile.dev``). Each line
``name: command`` runs under ``/bin/sh -c 'exec command'`` with the interpreter's own bin
folder first on PATH; its output is printed as ``HH:MM:SS name.1 | line``.

Nothing may outlive it (honcho, before, started each process in a session of its own, so a
killed honcho left web, worker and beat running):

- the processes share one process group of their own, apart from the terminal's, so a
  Ctrl-C reaches them once, through this supervisor;
- each is started with ``PR_SET_PDEATHSIG=SIGKILL`` (Linux), so it dies with the supervisor
  even when the supervisor is SIGKILLed (Celery's prefork pool processes die with the worker
  the same way), and the supervisor gets SIGTERM when its own parent (make, a shell) dies;
- SIGINT, SIGTERM and SIGHUP, or any process exiting cleanly (rc 0), stop them all: SIGTERM
  to each, then SIGKILL to the whole group after ``GRACE_SECONDS``; a second signal kills at
  once;
- a process that dies (non-zero exit or a signal: a crash, the OOM killer, ``kill -9``) is
  started again after ``RESTART_DELAYS`` (1, 2, 4, 8 s; a run of ``STABLE_SECONDS`` resets
  them), as a production supervisor would; one that dies sooner than that once more than
  that stops them all with its exit code;
- the ``web`` process serves on BPM_PORT (devtools/ports.py): a port that is taken stops
  everything with one line naming BPM_PORT, before anything starts or when ``web`` died
  and the port is still taken (someone else took it), never a web process started again
  and again on "address already in use".

Once the ``web`` process accepts connections on BPM_PORT, and the processes have had their
say (``SETTLE_SECONDS`` without a line, ``SETTLE_LIMIT_SECONDS`` at most), two ``system`` lines
say where the console is and which command creates the first reviewer: the last thing a
first run prints.

``python -m devtools.supervisor Procfile.dev web`` runs only the processes named (`make web`).
"""

from __future__ import annotations

import ctypes
import os
import re
import selectors
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from devtools.ports import HOST, PortProblem, configured_port, port_problem

GRACE_SECONDS = 10.0
RESTART_DELAYS = (1.0, 2.0, 4.0, 8.0)
STABLE_SECONDS = 60.0
PR_SET_PDEATHSIG = 1
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
COLOURS = ("36", "33", "32", "35", "34", "31")
PROCFILE_LINE = re.compile(r"^([A-Za-z0-9_-]+):\s*(.+)$")
PORT_PROCESS = "web"  # the Procfile process that serves on BPM_PORT
CONSOLE_PATH = "/admin/"  # where the reviewer console is served
SETTLE_SECONDS = 1.0
SETTLE_LIMIT_SECONDS = 10.0


def parse_procfile(text: str) -> list[tuple[str, str]]:
    """The ``(name, command)`` pairs of a Procfile; blank lines and ``#`` comments skipped."""
    entries = []
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        match = PROCFILE_LINE.match(line)
        if match is None:
            raise ValueError(f"not a Procfile line: {raw!r}")
        entries.append((match.group(1), match.group(2)))
    if not entries:
        raise ValueError("the Procfile names no process")
    return entries


def select(entries: list[tuple[str, str]], names: list[str]) -> list[tuple[str, str]]:
    """The entries named (all of them when ``names`` is empty), in the Procfile's order."""
    unknown = sorted(set(names) - {name for name, _ in entries})
    if unknown:
        known = ", ".join(name for name, _ in entries)
        raise ValueError(f"the Procfile has no process {', '.join(unknown)} (it has {known})")
    return [entry for entry in entries if not names or entry[0] in names]


def _prctl() -> Callable[..., int] | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None


@dataclass
class Child:
    name: str
    command: str
    colour: str
    process: subprocess.Popen[bytes] | None = None
    pending: bytes = b""
    open: bool = True
    reported: bool = False
    started_at: float = 0.0
    quick_failures: int = 0  # deaths in a row, each within STABLE_SECONDS of its start
    restart_at: float | None = None


@dataclass
class Supervisor:
    entries: list[tuple[str, str]]
    cwd: Path
    grace: float = GRACE_SECONDS
    restart_delays: tuple[float, ...] = RESTART_DELAYS
    port: int | None = None  # where the PORT_PROCESS serves: checked before it is started
    children: list[Child] = field(default_factory=list)
    retired: list[Child] = field(default_factory=list)  # died and replaced; pipes may be open
    pgid: int | None = None
    signals: list[int] = field(default_factory=list)
    stopping_since: float | None = None
    killed: bool = False
    exit_code: int = 0
    output_broken: bool = False
    announced: bool = False  # the console's address printed (once web first answers)
    serving_since: float | None = None  # when web first accepted a connection
    last_output: float = 0.0  # when a process last printed a line

    def __post_init__(self) -> None:
        self.children = [
            Child(f"{name}.1", command, COLOURS[index % len(COLOURS)])
            for index, (name, command) in enumerate(self.entries)
        ]
        self.width = max(len(name) for name in [*(c.name for c in self.children), "system"])
        self.colour = os.isatty(1)
        self.prctl = _prctl()

    # Output -------------------------------------------------------------------------
    def write(self, name: str, line: str, colour: str | None = None) -> None:
        prefix = f"{datetime.now():%H:%M:%S} {name.ljust(self.width)} | "
        if colour and self.colour:
            prefix = f"\033[0m\033[{colour}m{prefix}\033[0m"
        data = (prefix + line + "\n").encode("utf-8", "replace")
        while data and not self.output_broken:
            try:
                written = os.write(1, data)
            except InterruptedError:
                continue
            except OSError:  # the terminal is gone (SIGHUP) or nobody reads the pipe
                self.output_broken = True
                return
            data = data[written:]

    def system(self, message: str) -> None:
        self.write("system", message)

    def pump(self, child: Child, data: bytes) -> None:
        self.last_output = time.monotonic()
        *lines, child.pending = (child.pending + data).split(b"\n")
        for line in lines:
            self.write(child.name, line.rstrip(b"\r").decode("utf-8", "replace"), child.colour)

    # Processes ----------------------------------------------------------------------
    def environment(self) -> dict[str, str]:
        env = dict(os.environ)
        bin_dir = os.path.dirname(sys.executable)
        env["PATH"] = os.pathsep.join([bin_dir, env.get("PATH", os.defpath)])
        env.setdefault("PYTHONUNBUFFERED", "1")
        env.setdefault("LOG_TIMESTAMPS", "0")  # each line is stamped here already
        return env

    def child_setup(self) -> Callable[[], None]:
        supervisor_pid, prctl = os.getpid(), self.prctl

        def setup() -> None:  # in the child, between fork and exec
            if prctl is not None:
                prctl(PR_SET_PDEATHSIG, ctypes.c_ulong(signal.SIGKILL), 0, 0, 0)
            if os.getppid() != supervisor_pid:  # the supervisor died before prctl
                os._exit(1)

        return setup

    def start(self, selector: selectors.BaseSelector) -> None:
        env = self.environment()
        for child in self.children:
            self.spawn(child, selector, env)

    def spawn(self, child: Child, selector: selectors.BaseSelector, env: dict[str, str]) -> None:
        child.process = self._popen(child.command, env)
        child.started_at = time.monotonic()
        if self.pgid is None:
            self.pgid = child.process.pid
        assert child.process.stdout is not None
        os.set_blocking(child.process.stdout.fileno(), False)
        selector.register(child.process.stdout, selectors.EVENT_READ, child)
        self.system(f"{child.name} started (pid={child.process.pid})")

    def _popen(self, command: str, env: dict[str, str]) -> subprocess.Popen[bytes]:
        def popen(group: int) -> subprocess.Popen[bytes]:
            return subprocess.Popen(
                ["/bin/sh", "-c", f"exec {command}"],
                cwd=self.cwd,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                process_group=group,
                preexec_fn=self.child_setup(),
            )

        if self.pgid is not None:
            try:
                return popen(self.pgid)
            except (OSError, subprocess.SubprocessError):
                self.pgid = None  # every member of the old group is gone: start a new one
        return popen(0)

    def stop(self, reason: str) -> None:
        """SIGTERM to every process still running; SIGKILL follows after the grace period."""
        if self.stopping_since is not None:
            return
        self.stopping_since = time.monotonic()
        self.system(f"{reason}: stopping all processes")
        for child in self.children:
            if child.process is not None and child.process.poll() is None:
                self.system(f"sending SIGTERM to {child.name} (pid {child.process.pid})")
                try:
                    os.kill(child.process.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass

    def kill_group(self) -> None:
        """SIGKILL to the whole process group: the processes and anything they started."""
        if self.pgid is None:
            return
        self.reap()
        running = [
            child.name
            for child in self.children
            if child.process is not None and child.process.poll() is None
        ]
        if running and not self.killed:
            self.system(f"sending SIGKILL to all processes ({', '.join(running)} still running)")
        self.killed = True
        try:
            os.killpg(self.pgid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        for child in self.children:  # even one that left the group
            if child.process is not None and child.process.returncode is None:
                try:
                    os.kill(child.process.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass

    def reap(self) -> None:
        for child in self.children:
            if child.process is None and self.stopping_since is not None:
                child.reported, child.open = True, False  # never started
            if child.process is None or child.reported:
                continue
            code = child.process.poll()
            if code is None:
                continue
            child.reported = True
            self.system(f"{child.name} stopped (rc={code})")
            if self.stopping_since is None and not self.schedule_restart(child, code):
                self.exit_code = 128 - code if code < 0 else code
                self.stop(f"{child.name} exited")

    def announce_when_serving(self) -> None:
        """Say where the console is, and how to get in, once web first accepts a connection."""
        if self.announced or self.stopping_since is not None or self.port is None:
            return
        web = next((c for c in self.children if c.name == f"{PORT_PROCESS}.1"), None)
        if web is None or web.process is None or web.process.poll() is not None:
            return
        now = time.monotonic()
        if self.serving_since is None:
            try:
                socket.create_connection((HOST, self.port), timeout=0.2).close()
            except OSError:
                return
            self.serving_since = now
        settled = now - self.last_output >= SETTLE_SECONDS
        if not settled and now - self.serving_since < SETTLE_LIMIT_SECONDS:
            return
        self.announced = True
        for line in ready_lines(self.port, self.cwd):
            self.system(line)

    def port_problem(self, child: Child | None = None) -> str | None:
        """Why the web process cannot serve (the port is taken); None when it can, or when
        ``child`` is another process."""
        if self.port is None or (child is not None and child.name != f"{PORT_PROCESS}.1"):
            return None
        if not any(name == PORT_PROCESS for name, _ in self.entries):
            return None
        return port_problem(self.port)

    def schedule_restart(self, child: Child, code: int) -> bool:
        """Replace a child that died by one started after a delay; False to stop them all."""
        quick = time.monotonic() - child.started_at < STABLE_SECONDS
        failures = child.quick_failures + 1 if quick else 1
        if code == 0 or failures > len(self.restart_delays):
            return False
        problem = self.port_problem(child)
        if problem is not None:  # starting it again would fail the same way
            self.system(problem)
            return False
        delay = self.restart_delays[failures - 1]
        self.system(f"{child.name} died (rc={code}); starting it again in {delay:g}s")
        replacement = Child(child.name, child.command, child.colour, quick_failures=failures)
        replacement.restart_at = time.monotonic() + delay
        self.children[self.children.index(child)] = replacement
        self.retired.append(child)
        return True

    def restart_due(self, selector: selectors.BaseSelector) -> None:
        now = time.monotonic()
        for child in self.children:
            if self.stopping_since is None and child.restart_at is not None:
                if child.restart_at <= now:
                    child.restart_at = None
                    try:
                        self.spawn(child, selector, self.environment())
                    except OSError as error:
                        self.exit_code = 1
                        self.stop(f"cannot start {child.name}: {error}")

    def all_done(self) -> bool:
        return all(child.reported and not child.open for child in self.children)

    # Main loop ----------------------------------------------------------------------
    def run(self) -> int:
        problem = self.port_problem()
        if problem is not None:
            print(problem, file=sys.stderr)
            return 1
        wake_read, wake_write = os.pipe()
        for fd in (wake_read, wake_write):
            os.set_blocking(fd, False)
        previous_wakeup = signal.set_wakeup_fd(wake_write)
        handlers = {}
        for signum in (*STOP_SIGNALS, signal.SIGCHLD):
            handlers[signum] = signal.signal(signum, self.on_signal)
        selector = selectors.DefaultSelector()
        selector.register(wake_read, selectors.EVENT_READ, None)
        parent = os.getppid()
        if self.prctl is not None:
            self.prctl(PR_SET_PDEATHSIG, ctypes.c_ulong(signal.SIGTERM), 0, 0, 0)
            if os.getppid() != parent:
                self.signals.append(signal.SIGTERM)
        try:
            try:
                self.start(selector)
            except OSError as error:
                self.exit_code = 1
                self.stop(f"cannot start: {error}")
            self.loop(selector, wake_read)
        finally:
            self.kill_group()
            for child in [*self.retired, *self.children]:
                if child.process is not None:
                    child.process.wait()
                    if child.process.stdout is not None:
                        child.process.stdout.close()
            signal.set_wakeup_fd(previous_wakeup)
            for signum, handler in handlers.items():
                signal.signal(signum, handler)
            selector.close()
            os.close(wake_read)
            os.close(wake_write)
        return self.exit_code

    def on_signal(self, signum: int, frame: object) -> None:
        if signum != signal.SIGCHLD:
            self.signals.append(signum)

    def loop(self, selector: selectors.BaseSelector, wake_read: int) -> None:
        while True:
            for key, _ in selector.select(timeout=0.5):
                if key.data is None:
                    try:
                        os.read(wake_read, 4096)
                    except BlockingIOError:
                        pass
                    continue
                child: Child = key.data
                try:
                    data = os.read(key.fd, 65536)
                except BlockingIOError:
                    continue
                if data:
                    self.pump(child, data)
                else:
                    if child.pending:
                        self.pump(child, b"\n")
                    child.open = False
                    selector.unregister(key.fileobj)
            while self.signals:
                signum = self.signals.pop(0)
                name = signal.Signals(signum).name
                if self.stopping_since is None:
                    self.stop(f"{name} received")
                else:
                    self.system(f"{name} received again")
                    self.kill_group()
            self.reap()
            self.restart_due(selector)
            self.announce_when_serving()
            if self.stopping_since is not None:
                if all(child.reported for child in self.children):
                    # Anything the processes left behind in the group (and their pipes).
                    self.kill_group()
                    # Their last lines are read until the pipes close (for a second at most).
                    if self.all_done() or time.monotonic() - self.stopping_since > self.grace + 1:
                        return
                elif time.monotonic() - self.stopping_since > self.grace:
                    self.kill_group()


def ready_lines(port: int, cwd: Path) -> list[str]:
    """What a person needs once the system serves: the console's address, and the command
    (run in another terminal, in ``cwd``) that creates the first account to sign in with."""
    python = Path(sys.executable)
    if python.is_relative_to(cwd):
        python = python.relative_to(cwd)
    return [
        f"ready: the console is at http://{HOST}:{port}{CONSOLE_PATH} (Ctrl-C stops everything)",
        "first account (another terminal, asks for a password): "
        f"DEBUG=1 {python} manage.py create_reviewer YOUR-NAME --admin",
    ]


def main(argv: list[str] | None = None) -> int:
    """``[Procfile [name ...]]``: run the Procfile's processes, or only those named."""
    args = sys.argv[1:] if argv is None else argv
    procfile = Path(args[0] if args else "Procfile.dev")
    try:
        entries = select(parse_procfile(procfile.read_text()), args[1:])
        port = configured_port()
    except (OSError, ValueError, PortProblem) as problem:
        print(problem, file=sys.stderr)
        return 1
    supervisor = Supervisor(entries, cwd=procfile.resolve().parent, port=port)
    return supervisor.run()


if __name__ == "__main__":
    sys.exit(main())

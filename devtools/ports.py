"""The port `make run` and `make web` serve on: BPM_PORT, 8000 by default.

A port that is taken ends in one line that says what to set, before anything starts,
instead of a web process that dies on "address already in use" and is started again.
Standard library only: the Makefile runs ``python3 devtools/ports.py`` before the virtualenv
exists (exit 1 and that line when the port cannot be served on); devtools/supervisor.py
checks again before it starts or restarts the web process.
"""

from __future__ import annotations

import errno
import os
import socket
import sys
from collections.abc import Mapping

PORT_VARIABLE = "BPM_PORT"
DEFAULT_PORT = 8000
HOST = "127.0.0.1"  # where Procfile.dev's web process listens
SUGGESTIONS = 100  # how many ports above a taken one are tried for a free one


class PortProblem(Exception):
    """Why the web process cannot serve, in one line for a person."""


def configured_port(environ: Mapping[str, str] | None = None) -> int:
    """BPM_PORT from the environment (8000 when unset or empty)."""
    value = (os.environ if environ is None else environ).get(PORT_VARIABLE, "").strip()
    if not value:
        return DEFAULT_PORT
    if not value.isdigit() or not 0 < int(value) < 65536:
        raise PortProblem(f"{PORT_VARIABLE}={value!r} is not a port number (1-65535)")
    return int(value)


def bind_error(port: int, host: str = HOST) -> OSError | None:
    """The error a server listening on host:port would get now, bound as uvicorn binds
    (SO_REUSEADDR: a closed connection's TIME_WAIT does not count); None when free."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as error:
            return error
    return None


def free_port_above(port: int, host: str = HOST) -> int | None:
    for candidate in range(port + 1, min(port + 1 + SUGGESTIONS, 65536)):
        if bind_error(candidate, host) is None:
            return candidate
    return None


def port_problem(port: int, host: str = HOST) -> str | None:
    """One line saying that ``port`` is taken and which BPM_PORT (and BPM_URL) to set."""
    error = bind_error(port, host)
    if error is None:
        return None
    if error.errno == errno.EADDRINUSE:
        what = f"port {port} is in use"
    else:
        what = f"cannot serve on {host}:{port} ({error.strerror or error})"
    other = free_port_above(port, host)
    if other is None:
        return f"{what}: set {PORT_VARIABLE} to a free port (and BPM_URL to match)"
    return f"{what}: set {PORT_VARIABLE}={other} (and BPM_URL=http://{host}:{other})"


def check(environ: Mapping[str, str] | None = None) -> str | None:
    """The configured port's problem, if any (a malformed BPM_PORT included)."""
    try:
        return port_problem(configured_port(environ))
    except PortProblem as problem:
        return str(problem)


def main() -> int:
    problem = check()
    if problem is not None:
        print(problem, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

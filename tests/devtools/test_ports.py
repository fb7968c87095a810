"""BPM_PORT, checked before `make run` and `make web` start: a taken port is one line that
names BPM_PORT, a free port above it and the BPM_URL that goes with it (devtools/ports.py)."""

import socket
import subprocess
import sys
from collections.abc import Iterator

import pytest

from devtools.ports import PortProblem, configured_port, port_problem
from tests.support.project import ROOT

PORTS_SCRIPT = ROOT / "devtools" / "ports.py"


@pytest.fixture
def taken_port() -> Iterator[int]:
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        yield squatter.getsockname()[1]


def test_the_port_is_8000_unless_bpm_port_says_otherwise():
    assert configured_port({}) == 8000
    assert configured_port({"BPM_PORT": ""}) == 8000
    assert configured_port({"BPM_PORT": " 8123 "}) == 8123


@pytest.mark.parametrize("value", ["abc", "0", "65536", "-1", "80.5"])
def test_a_bpm_port_that_is_not_a_port_number_is_refused(value):
    with pytest.raises(PortProblem, match=r"^BPM_PORT='.*' is not a port number \(1-65535\)$"):
        configured_port({"BPM_PORT": value})


def test_a_free_port_has_no_problem():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    assert port_problem(port) is None


def test_a_taken_port_names_bpm_port_a_free_port_and_the_bpm_url_to_match(taken_port):
    problem = port_problem(taken_port)
    assert problem is not None
    assert problem.startswith(f"port {taken_port} is in use: set BPM_PORT=")
    suggested = int(problem.split("BPM_PORT=")[1].split()[0])
    assert suggested > taken_port
    assert problem.endswith(f" (and BPM_URL=http://127.0.0.1:{suggested})")
    assert port_problem(suggested) is None


def test_the_makefile_check_needs_only_the_standard_library_and_exits_1(taken_port):
    """`python3 devtools/ports.py` runs before the virtualenv exists (-I: no site-packages)."""
    result = subprocess.run(
        [sys.executable, "-I", str(PORTS_SCRIPT)],
        env={"BPM_PORT": str(taken_port)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 1
    assert result.stdout == ""
    [line] = result.stderr.splitlines()
    assert line.startswith(f"port {taken_port} is in use: set BPM_PORT=")

"""The TypeScript SDK (clients/typescript) for the tests that build, pack and run it.

Its npm packages come from its lockfile (`npm ci`, as .ci/run does in a phase of its own),
installed here when node_modules is missing, under a lock: test processes running side by
side install it once. The tests build and pack a copy of the package in a temporary folder (its
node_modules linked), so nothing is written into the source tree while several test
processes may read it. Without node and npm the tests skip, saying so.
"""

import fcntl
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest

PROJECT_DIR = Path(__file__).resolve().parents[2]
PACKAGE_DIR = PROJECT_DIR / "clients" / "typescript"
NODE_MODULES = PACKAGE_DIR / "node_modules"
NPM_CI = ["npm", "ci", "--ignore-scripts", "--no-audit", "--no-fund"]
INSTALL_SECONDS = 600
# What a copy of the package needs to build, test and pack (node_modules is linked).
PACKAGE_FILES = ["package.json", "package-lock.json", "tsconfig.json", "README.md", "src", "test"]
# A TAP test point of node's reporter: `ok 3 - name` or `not ok 3 - name # SKIP reason`,
# indented by its depth.
TAP_TEST_POINT = re.compile(r"^\s*(ok|not ok) \d+ - (.*?)(?: # (SKIP|TODO)\b.*)?$")


def require_node() -> None:
    """Skip the test when node or npm is absent."""
    missing = [tool for tool in ("node", "npm") if shutil.which(tool) is None]
    if missing:
        pytest.skip(f"the TypeScript SDK's tests need {' and '.join(missing)} on PATH")


def install_packages() -> Path:
    """clients/typescript/node_modules, installed from the lockfile when missing."""
    require_node()
    lock_path = Path(tempfile.gettempdir()) / "bpm-typescript-npm-ci.lock"
    with lock_path.open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not _installed_from_lockfile():
            done = subprocess.run(
                NPM_CI, cwd=PACKAGE_DIR, capture_output=True, text=True, timeout=INSTALL_SECONDS
            )
            assert done.returncode == 0, f"npm ci failed:\n{done.stderr[-3000:]}"
    return NODE_MODULES


def _installed_from_lockfile() -> bool:
    """Whether node_modules was installed since the lockfile last changed (npm ci writes
    node_modules/.package-lock.json)."""
    installed = NODE_MODULES / ".package-lock.json"
    lockfile = PACKAGE_DIR / "package-lock.json"
    return installed.exists() and installed.stat().st_mtime >= lockfile.stat().st_mtime


def package_copy(into: Path) -> Path:
    """A copy of the package in `into` (its node_modules linked to the installed one)."""
    install_packages()
    into.mkdir(parents=True, exist_ok=True)
    for name in PACKAGE_FILES:
        source = PACKAGE_DIR / name
        if source.is_dir():
            shutil.copytree(source, into / name)
        else:
            shutil.copy2(source, into / name)
    (into / "node_modules").symlink_to(NODE_MODULES, target_is_directory=True)
    return into


@dataclass(frozen=True)
class NodeTestResult:
    name: str
    passed: bool
    skipped: bool


def node_test_results(tap: str) -> dict[str, NodeTestResult]:
    """The test points of node's TAP output, by test name (suites included)."""
    points = {}
    for line in tap.splitlines():
        match = TAP_TEST_POINT.match(line)
        if match:
            status, name, directive = match.groups()
            name = name.replace("\\#", "#").replace("\\\\", "\\")
            points[name] = NodeTestResult(name, status == "ok", directive == "SKIP")
    return points

"""The TypeScript SDK (clients/typescript, npm package `breakpoint-manager`) against the live
system.

The package is packed with `npm pack` (which builds it). Its own tests
(clients/typescript/test/live.test.mjs, node's test runner) run on that build, one node
test per pytest test, as the agent agent-a (BPM_TOKEN) with the reviewer alice
(BPM_REVIEWER_TOKEN) deciding through the REST API while the agent waits; node's TAP output
says whether that test passed. The tarball is installed, offline, into an empty folder,
where it runs and its type declarations compile.
"""

import json
import os
import re
import subprocess
import tarfile
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.typescript import (
    NODE_MODULES,
    PACKAGE_DIR,
    node_test_results,
    package_copy,
)

NODE_TEST_FILE = "test/live.test.mjs"
NODE_TEST_SECONDS = 180  # a bound for a hanging node, never an assertion
REVIEWER = "alice"  # the reviewer_token fixture's user
NODE_TESTS = [
    "create answers with a waiting breakpoint that get and status read back",
    "wait returns the approval a reviewer makes while it waits",
    "ask returns a rejection with the reviewer's comment, its receipt verified",
    "a breakpoint past its TTL expires, and wait returns the expiry",
    "aborting a wait ends it and leaves the breakpoint waiting",
    "aborting an ask with cancelOnAbort cancels the breakpoint on the server",
    "cancel cancels, and a decided breakpoint cannot be cancelled",
    "waitAny returns every entry once one of them is decided",
    "waitAny and wait give up with WaitTimeout when nothing is decided in time",
    "verify accepts a genuine receipt and refuses a tampered one",
    "the same idempotency key returns the first breakpoint; with another body it is a conflict",
    "errors carry the envelope's code: not found, not authenticated",
]


@dataclass(frozen=True)
class Packed:
    package: Path  # a copy of the package, built by `npm pack` (its prepack script)
    tarball: Path  # what `npm pack` made of it


@pytest.fixture(scope="module")
def packed(tmp_path_factory) -> Packed:
    """The package packed with `npm pack`, which builds it first (dist/ compiled from src/)."""
    folder = tmp_path_factory.mktemp("typescript")
    package = package_copy(folder / "breakpoint-manager")
    output = _npm(["pack", "--pack-destination", str(folder)], package)
    return Packed(package, folder / output.strip().splitlines()[-1])


@pytest.fixture
def node_env(live, agent_token, reviewer_token) -> dict[str, str]:
    """The environment of a node process: the server, the agent's and the reviewer's tokens."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("BPM_")}
    return {
        **env,
        "BPM_URL": live.base_url,
        "BPM_TOKEN": agent_token,
        "BPM_REVIEWER_TOKEN": reviewer_token,
        "BPM_REVIEWER_NAME": REVIEWER,
        "NO_COLOR": "1",
    }


def test_every_node_test_is_run_here():
    """The list above names every test of the node file: none is left out of `make test`."""
    source = (PACKAGE_DIR / NODE_TEST_FILE).read_text()
    declared = [
        json.loads(name) for name in re.findall(r'^\s*test\(("(?:[^"\\]|\\.)*")', source, re.M)
    ]
    assert declared == NODE_TESTS


@pytest.mark.parametrize("name", NODE_TESTS)
def test_node_test_passes(name, packed, node_env):
    """Each node test of the SDK passes against the live service."""
    done = subprocess.run(
        ["node", "--test", "--test-reporter=tap", f"--test-name-pattern=^{re.escape(name)}$"]
        + [NODE_TEST_FILE],
        cwd=packed.package,
        env=node_env,
        capture_output=True,
        text=True,
        timeout=NODE_TEST_SECONDS,
    )
    result = node_test_results(done.stdout).get(name)
    assert result is not None, f"node did not run {name!r}:\n{done.stdout}\n{done.stderr}"
    assert not result.skipped, f"node skipped {name!r}:\n{done.stdout}"
    assert result.passed, f"node test {name!r} failed:\n{done.stdout}\n{done.stderr}"
    assert done.returncode == 0, done.stdout + done.stderr


def test_packed_package_installs_and_runs_in_an_empty_directory(packed, tmp_path, node_env):
    """`npm pack` makes a tarball of the build and the README only; installed offline into
    an empty folder (with jose, its one dependency), it imports, talks to the service, and
    its type declarations type-check a consumer's code."""
    tarball = packed.tarball
    with tarfile.open(tarball) as archive:
        names = set(archive.getnames())
    assert {"package/dist/index.js", "package/dist/index.d.ts", "package/README.md"} <= names
    assert not [n for n in names if n.startswith(("package/src/", "package/test/"))]
    jose = tmp_path / _npm(["pack", str(NODE_MODULES / "jose")], tmp_path).strip().splitlines()[-1]

    app = tmp_path / "app"
    app.mkdir()
    (app / "package.json").write_text(
        json.dumps({"name": "app", "private": True, "type": "module"})
    )
    _npm(["install", "--offline", "--no-audit", "--no-fund", str(tarball), str(jose)], app)
    (app / "run.mjs").write_text(CONSUMER_JS)
    ran = subprocess.run(["node", "run.mjs"], cwd=app, env=node_env, capture_output=True, text=True)
    assert ran.returncode == 0, ran.stderr
    assert json.loads(ran.stdout) == {"status": "waiting", "question": "Installed from a tarball?"}

    (app / "consumer.ts").write_text(CONSUMER_TS)
    checked = subprocess.run(
        [str(NODE_MODULES / ".bin" / "tsc"), "--noEmit", "--strict", "--module", "nodenext"]
        + ["--moduleResolution", "nodenext", "--target", "es2022", "--types", "node"]
        + ["--typeRoots", str(NODE_MODULES / "@types"), "consumer.ts"],
        cwd=app,
        capture_output=True,
        text=True,
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr


def _npm(args: list[str], cwd: Path) -> str:
    done = subprocess.run(["npm", *args], cwd=cwd, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"npm {' '.join(args)} failed:\n{done.stdout}{done.stderr}"
    return done.stdout


CONSUMER_JS = """
import { Client, NotFound } from "breakpoint-manager";

const client = new Client();
const created = await client.create({ payload: { question: "Installed from a tarball?" } });
const read = await client.get(created.breakpointId);
await client.get("bp-missing").catch((error) => {
  if (!(error instanceof NotFound)) throw error;
});
console.log(JSON.stringify({ status: read.status, question: read.question }));
"""

# The declarations are real types: a wrong body must not compile (@ts-expect-error fails
# the check if the line compiles, as it would were everything `any`).
CONSUMER_TS = """
import { Client, type Decision, type StatusName } from "breakpoint-manager";

export async function gate(client: Client): Promise<StatusName> {
  const decision: Decision = await client.ask({ payload: { question: "Ship it?" }, tags: ["deploy"] });
  // @ts-expect-error ttlSeconds is a number
  await client.create({ payload: {}, ttlSeconds: "soon" });
  return decision.status;
}
"""

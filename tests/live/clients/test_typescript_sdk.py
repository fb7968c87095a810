"""The TypeScript SDK (clients/typescript, npm package `breakpoint-manager`) against the live
system.

The package is packed with `npm pack` (which builds it). Its own tests
(clients/typescript/test/*.test.mjs, node's test runner) run on that build, one node
process per file, as the agent agent-a (BPM_TOKEN) with the reviewer alice
(BPM_REVIEWER_TOKEN) deciding through the REST API while the agent waits; node's TAP output
says which passed. test/ai.test.mjs drives breakpoint-manager/ai with the AI SDK's mock
language model. The tarball is installed, offline, into an empty folder,
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

NODE_TEST_SECONDS = 600  # a bound for a hanging node, never an assertion
REVIEWER = "alice"  # the reviewer_token fixture's user
# Every test of the node files, by file: each must pass.
NODE_TESTS = {
    "test/live.test.mjs": [
        "create answers with a waiting breakpoint that get and status read back",
        "wait returns the approval a reviewer makes while it waits",
        "wait reconnects through a dropped connection and a 503, then returns the approval",
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
    ],
    # breakpoint-manager/ai with the AI SDK's mock language model.
    "test/ai.test.mjs": [
        "tool names become breakpoint keys in dotted kebab-case",
        "an approved tool call runs with the values the reviewer edited",
        "a rejected tool call does not run and returns the reviewer's comment to the model",
        "a run restarted with the same tool call id finds its breakpoint and the decision made "
        "meanwhile",
    ],
}


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
    """The list above names every test of the node files: none is left out of `make test`."""
    files = sorted(path.name for path in (PACKAGE_DIR / "test").glob("*.test.mjs"))
    assert files == sorted(Path(name).name for name in NODE_TESTS)
    for name, tests in NODE_TESTS.items():
        source = (PACKAGE_DIR / name).read_text()
        declared = re.findall(r'^\s*test\(("(?:[^"\\]|\\.)*")', source, re.M)
        assert [json.loads(test) for test in declared] == tests, name


@pytest.mark.parametrize("node_file", list(NODE_TESTS))
def test_node_tests_pass(node_file, packed, node_env):
    """Every node test of the file passes against the live service (one node process per
    file; a failure names the node tests that failed, with node's TAP output)."""
    done = subprocess.run(
        ["node", "--test", "--test-reporter=tap", node_file],
        cwd=packed.package,
        env=node_env,
        capture_output=True,
        text=True,
        timeout=NODE_TEST_SECONDS,
    )
    results = node_test_results(done.stdout)
    not_passed = [
        name
        for name in NODE_TESTS[node_file]
        if name not in results or results[name].skipped or not results[name].passed
    ]
    assert not not_passed, (
        f"node tests that did not pass: {not_passed}\n{done.stdout}\n{done.stderr[-3000:]}"
    )
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

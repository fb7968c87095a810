"""`bpm gateway` in front of the official MCP reference servers, installed from npm.

The servers are `@modelcontextprotocol/server-filesystem` and `server-memory`, pinned in
tests/live/clients/mcp_servers (package.json and its lockfile; `npm ci` installs them there
when node_modules is missing, as .ci/run does). They are built on the TypeScript SDK: their
input schemas declare JSON Schema draft-07 and their tools carry annotations, unlike the
Python upstream of test_gateway.py. The official Python MCP client starts the gateway over
stdio, the gateway starts the server; reviewers decide through the API while calls wait.
"""

import asyncio
import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from bpm_client import Client

from tests.live.clients.conftest import BPM
from tests.support.gateway import connect, in_thread, text_of, waiting, waiting_on
from tests.support.mcp import HANG_GUARD_SECONDS, run

FIXTURE = Path(__file__).resolve().parent / "mcp_servers"
BIN = FIXTURE / "node_modules" / ".bin"
NPM_CI = ["npm", "ci", "--ignore-scripts", "--no-audit", "--no-fund"]
INSTALL_SECONDS = 600

FILESYSTEM_RULES = """
[defaults]
server = "filesystem"

[[rules]]
tools = ["write_file", "edit_file"]
action = "ask"

[[rules]]
tools = ["move_file"]
action = "deny"

[[rules]]
tools = ["*"]
action = "allow"
"""

MEMORY_RULES = """
[defaults]
server = "memory"

[[rules]]
tools = ["delete_*"]
action = "ask"

[[rules]]
tools = ["*"]
action = "allow"
"""


@pytest.fixture(scope="session")
def mcp_servers_bin() -> Path:
    """The reference servers' executables, installed from the lockfile when missing."""
    if not (BIN / "mcp-server-filesystem").exists():
        assert shutil.which("npm"), "node and npm are needed: the test runs npm MCP servers"
        done = subprocess.run(
            NPM_CI, cwd=FIXTURE, capture_output=True, text=True, timeout=INSTALL_SECONDS
        )
        assert done.returncode == 0, done.stderr[-3000:]
    return BIN


class Reference:
    """A gateway configuration in front of one reference server, and the server's files."""

    def __init__(self, tmp_path: Path, env: dict[str, str], rules: str, command: list[str]):
        self.root = tmp_path / "files"
        self.root.mkdir()
        self.config = tmp_path / "gate.toml"
        self.config.write_text(rules)
        self.env = env
        self.command = command

    def session(self) -> Any:
        args = ["gateway", "--config", str(self.config), "--", *self.command]
        return connect(BPM, args, self.env)


@pytest.fixture
def filesystem(tmp_path: Path, bpm_env: dict[str, str], mcp_servers_bin: Path) -> Reference:
    """server-filesystem, allowed to touch tmp_path/files only."""
    files = tmp_path / "files"
    command = [str(mcp_servers_bin / "mcp-server-filesystem"), str(files)]
    return Reference(tmp_path, bpm_env, FILESYSTEM_RULES, command)


@pytest.fixture
def memory(tmp_path: Path, bpm_env: dict[str, str], mcp_servers_bin: Path) -> Reference:
    """server-memory, its knowledge graph kept in tmp_path/files/memory.jsonl."""
    env = {**bpm_env, "MEMORY_FILE_PATH": str(tmp_path / "files" / "memory.jsonl")}
    return Reference(tmp_path, env, MEMORY_RULES, [str(mcp_servers_bin / "mcp-server-memory")])


def test_filesystem_an_allowed_read_runs_and_a_denied_move_never_reaches_the_server(
    filesystem: Reference, agent: Client
):
    notes = filesystem.root / "notes.txt"
    notes.write_text("hello from the test\n")

    async def scenario():
        async with filesystem.session() as session:
            listed = [tool.name for tool in (await session.list_tools()).tools]
            read = await session.call_tool("read_text_file", {"path": str(notes)})
            moved = await session.call_tool(
                "move_file", {"source": str(notes), "destination": str(notes) + ".moved"}
            )
            return listed, read, moved

    listed, read, moved = run(scenario())
    assert "read_text_file" in listed and "write_file" in listed
    assert "move_file" not in listed  # every call of it is denied: not offered
    assert not read.is_error and text_of(read) == "hello from the test\n"
    assert moved.is_error
    assert "`move_file` was not run: the gateway's rules[2] denies it" in text_of(moved)
    assert sorted(path.name for path in filesystem.root.iterdir()) == ["notes.txt"]
    assert list(agent.list()) == []  # nothing needed a human


def test_filesystem_a_reviewer_edits_the_content_and_the_file_holds_exactly_the_edit(
    filesystem: Reference, reviewer: Client
):
    target = filesystem.root / "release-notes.md"
    proposed = {"path": str(target), "content": "# Release\n\nShip it on Friday.\n"}
    edited = {**proposed, "content": "# Release\n\nShip it on Monday, not Friday.\n"}
    seen: dict[str, Any] = {}

    def review() -> None:
        breakpoint_id = waiting_on(reviewer, "write_file")
        seen["breakpoint"] = reviewer.get(breakpoint_id)
        seen["existed_while_waiting"] = target.exists()
        reviewer.release(breakpoint_id, "not on a Friday", values=edited)

    async def scenario():
        async with filesystem.session() as session:
            tools = {tool.name: tool for tool in (await session.list_tools()).tools}
            call, _ = await waiting(session, "write_file", proposed)
            await in_thread(review)
            return tools["write_file"], await asyncio.wait_for(call, HANG_GUARD_SECONDS)

    tool, result = run(scenario())
    bp = seen["breakpoint"]
    assert bp.title == "Call write_file on filesystem?"
    assert bp.payload["proposal"] == proposed
    assert tool.input_schema["$schema"] == "http://json-schema.org/draft-07/schema#"
    assert seen["existed_while_waiting"] is False  # nothing ran before the approval
    assert not result.is_error, text_of(result)
    assert target.read_bytes() == edited["content"].encode()  # exactly the edited content


def test_filesystem_a_rejected_write_writes_nothing_and_returns_the_comment(
    filesystem: Reference, reviewer: Client
):
    target = filesystem.root / "passwords.txt"

    async def scenario():
        async with filesystem.session() as session:
            call, _ = await waiting(session, "write_file", {"path": str(target), "content": "x"})
            await in_thread(
                lambda: reviewer.release(
                    waiting_on(reviewer, "write_file"), "not there", approved=False
                )
            )
            return await asyncio.wait_for(call, HANG_GUARD_SECONDS)

    result = run(scenario())
    assert result.is_error
    assert text_of(result).startswith("`write_file` was not run: rejected by alice")
    assert text_of(result).endswith("Their feedback: not there")
    assert list(filesystem.root.iterdir()) == []  # nothing written


def test_memory_allowed_calls_run_and_reach_the_graph(memory: Reference, agent: Client):
    entity = {"name": "Ada", "entityType": "person", "observations": ["wrote a program"]}

    async def scenario():
        async with memory.session() as session:
            created = await session.call_tool("create_entities", {"entities": [entity]})
            graph = await session.call_tool("read_graph", {})
            return created, graph

    created, graph = run(scenario())
    assert not created.is_error and not graph.is_error
    assert json.loads(text_of(graph))["entities"][0]["name"] == "Ada"
    assert "Ada" in (memory.root / "memory.jsonl").read_text()
    assert list(agent.list()) == []


def test_memory_an_approved_delete_runs(memory: Reference, reviewer: Client):
    entity = {"name": "Ada", "entityType": "person", "observations": []}

    async def scenario():
        async with memory.session() as session:
            await session.call_tool("create_entities", {"entities": [entity]})
            call, _ = await waiting(session, "delete_entities", {"entityNames": ["Ada"]})
            await in_thread(lambda: reviewer.release(waiting_on(reviewer, "delete_entities"), "ok"))
            deleted = await asyncio.wait_for(call, HANG_GUARD_SECONDS)
            return deleted, await session.call_tool("read_graph", {})

    deleted, graph = run(scenario())
    assert not deleted.is_error, text_of(deleted)
    assert json.loads(text_of(graph))["entities"] == []

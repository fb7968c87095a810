"""The reviewer's commands (approve, reject) and `bpm mcp`."""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import click

from .app import Settings, connect
from .failures import CliError
from .output import decided, summary

# bpm-client is on no package index: it installs from the project's folder.
MCP_REQUIREMENT = "'./clients/python[mcp]'"


def _shown(path: Path) -> str:
    """`path` as a person types it: relative to the current folder when inside it."""
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def mcp_install_command() -> str:
    """The command that installs the `mcp` extra into the environment running bpm: pip's,
    or, in a virtualenv that has no pip but uv (the `.venv` that `make run` makes), uv's."""
    if importlib.util.find_spec("pip") is None:
        uv = Path(sys.prefix) / "bin" / "uv"
        if os.access(uv, os.X_OK):
            python = Path(sys.prefix) / "bin" / "python"
            return f"{_shown(uv)} pip install --python {_shown(python)} {MCP_REQUIREMENT}"
    return f"pip install {MCP_REQUIREMENT}"


def mcp_missing(command: str = "bpm mcp") -> str:
    """What `command` says when the `mcp` extra is not installed: how to install it."""
    return f"{command} needs the MCP SDK: {mcp_install_command()} (in the project's folder)"


@click.command()
@click.argument("breakpoint_id", metavar="ID")
@click.option("-m", "--message", default="", help="A comment for the agent.")
@click.option("--option", help="The option chosen (one of the breakpoint's options).")
@click.pass_context
def approve(ctx: click.Context, breakpoint_id: str, message: str, option: str | None) -> None:
    """Approve breakpoint ID (needs a reviewer's token)."""
    answer = connect(ctx).release(breakpoint_id, message, approved=True, option=option)
    click.echo(summary(decided(breakpoint_id, answer)))


@click.command()
@click.argument("breakpoint_id", metavar="ID")
@click.option("-m", "--message", required=True, help="Why (the agent reads it).")
@click.pass_context
def reject(ctx: click.Context, breakpoint_id: str, message: str) -> None:
    """Reject breakpoint ID with a reason (needs a reviewer's token)."""
    if not message.strip():
        raise click.BadParameter("a rejection needs a reason", param_hint="'-m' / '--message'")
    answer = connect(ctx).release(breakpoint_id, message, approved=False)
    click.echo(summary(decided(breakpoint_id, answer)))


@click.command()
@click.pass_obj
def mcp(settings: Settings) -> None:
    """Serve the MCP tools over stdio, for MCP clients.

    For Claude Code, Claude Desktop, Cursor, ...: `{"command": "bpm", "args": ["mcp"]}`
    with BPM_URL and BPM_TOKEN (an agent's token) in its environment.
    """
    try:
        # Imported here, not at the top: `mcp` is an optional extra that every other
        # command does without.
        from .. import mcp_server
    except ImportError as error:
        if (error.name or "").partition(".")[0] == "mcp":
            raise CliError(mcp_missing()) from None
        raise CliError(f"cannot load the MCP server: {error}") from None
    mcp_server.main(settings.url, settings.token)

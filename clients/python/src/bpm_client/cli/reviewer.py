"""The reviewer's commands (approve, reject) and `bpm mcp`."""

from __future__ import annotations

import click

from ..extras import install_command
from .app import Settings, connect
from .failures import CliError
from .output import decided, summary


def mcp_missing(command: str = "bpm mcp") -> str:
    """What `command` says when the `mcp` extra is not installed: how to install it."""
    return f"{command} needs the MCP SDK: {install_command('mcp')} (in the project's folder)"


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

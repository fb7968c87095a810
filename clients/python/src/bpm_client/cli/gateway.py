"""`bpm gateway`: the approval gateway in front of an MCP server (see gateway/)."""

from __future__ import annotations

import click

from .app import Settings
from .failures import CliError
from .output import warn
from .reviewer import MCP_MISSING


@click.command(context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.option(
    "--config",
    "config_file",
    metavar="FILE",
    help="The rules (TOML): which tools are allowed, denied, or asked about.",
)
@click.option(
    "--upstream-url",
    metavar="URL",
    help="A streamable-HTTP MCP server to gate, instead of a COMMAND.",
)
@click.argument("command", nargs=-1, type=click.UNPROCESSED)
@click.pass_obj
def gateway(
    settings: Settings, config_file: str | None, upstream_url: str | None, command: tuple[str, ...]
) -> None:
    """Gate an MCP server's tool calls: serve its tools over stdio, asking a human
    (BPM_URL, BPM_TOKEN: an agent's token) before the calls the rules say to ask about.

    \b
      bpm gateway --config gate.toml -- python billing_server.py
      bpm gateway --config gate.toml --upstream-url http://127.0.0.1:9000/mcp
    """
    if bool(command) == bool(upstream_url):
        raise click.UsageError("give the upstream: either -- COMMAND [ARGS...] or --upstream-url")
    try:
        # The `mcp` extra: imported here so that every other command does without it.
        from ..gateway.config import GatewayConfigError, load_config
        from ..gateway.server import main
    except ImportError as error:
        if (error.name or "").partition(".")[0] in ("mcp", "jmespath"):
            raise CliError(MCP_MISSING.replace("bpm mcp", "bpm gateway")) from None
        raise CliError(f"cannot load the gateway: {error}") from None
    try:
        config = load_config(config_file)
    except GatewayConfigError as error:
        raise CliError(str(error)) from None
    if config_file is None:
        warn("no --config: every tool call is allowed (nothing asks a human)")
    main(config, command, upstream_url=upstream_url, url=settings.url, token=settings.token)

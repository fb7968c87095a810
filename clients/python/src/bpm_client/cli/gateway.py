"""`bpm gateway`: the approval gateway in front of an MCP server (see gateway/)."""

from __future__ import annotations

import click

from .app import Settings
from .failures import CliError
from .output import warn
from .reviewer import mcp_missing


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
@click.option(
    "--listen",
    metavar="HOST:PORT",
    help="Serve over streamable HTTP at http://HOST:PORT/mcp for many agents, each "
    "authenticating with its own agent token (Authorization: Bearer), instead of stdio.",
)
@click.option(
    "--print-config",
    is_flag=True,
    help="Print the rules in force (the --config file's, or the defaults) as TOML and exit.",
)
@click.argument("command", nargs=-1, type=click.UNPROCESSED)
@click.pass_obj
def gateway(
    settings: Settings,
    config_file: str | None,
    upstream_url: str | None,
    listen: str | None,
    print_config: bool,
    command: tuple[str, ...],
) -> None:
    """Gate an MCP server's tool calls: serve its tools over stdio, asking a human
    (BPM_URL, BPM_TOKEN: an agent's token) before the calls the rules say to ask about.
    Without --config the tools' annotations decide: read-only tools run, the others ask.

    \b
      bpm gateway --config gate.toml -- python billing_server.py
      bpm gateway --config gate.toml --upstream-url http://127.0.0.1:9000/mcp
      bpm gateway --listen 127.0.0.1:8808 --config gate.toml -- python billing_server.py
      bpm gateway --print-config
    """
    if not print_config and bool(command) == bool(upstream_url):
        raise click.UsageError("give the upstream: either -- COMMAND [ARGS...] or --upstream-url")
    try:
        # The `mcp` extra: imported here so that every other command does without it.
        from ..gateway.config import GatewayConfigError, config_toml, load_config
        from ..gateway.listen import main as listen_main
        from ..gateway.listen import parse_listen
        from ..gateway.server import main
    except ImportError as error:
        if (error.name or "").partition(".")[0] in ("mcp", "jmespath"):
            raise CliError(mcp_missing("bpm gateway")) from None
        raise CliError(f"cannot load the gateway: {error}") from None
    try:
        config = load_config(config_file)
    except GatewayConfigError as error:
        raise CliError(str(error)) from None
    if print_config:
        where = config_file or "no --config: the defaults (the tools' annotations decide)"
        click.echo(f"# The rules in force: {where}\n" + config_toml(config), nl=False)
        return
    if config_file is None:
        warn("no --config: read-only tools run, every other tool call asks a human")
    if listen is not None:
        try:
            parse_listen(listen)
        except ValueError as error:
            raise click.UsageError(str(error)) from None
        listen_main(config, command, address=listen, upstream_url=upstream_url, url=settings.url)
        return
    main(config, command, upstream_url=upstream_url, url=settings.url, token=settings.token)

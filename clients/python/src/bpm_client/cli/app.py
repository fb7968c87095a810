"""The `bpm` group: global options (--url, --token), the client, and options shared by commands."""

from __future__ import annotations

import dataclasses
import json
import typing
import warnings
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

import click

from .. import __version__
from ..bodies import BreakpointFields, ContextFileCut, context_file
from ..client import Client
from ..config import DEFAULT_URL, TOKEN_VARIABLE, URL_VARIABLE
from ..events.sending import SECRET_ENV as SECRET_VARIABLE
from ..models import Strategy
from .failures import EXIT_CODES_HELP, CliError
from .output import warn

F = TypeVar("F", bound=Callable[..., Any])

ON_TIMEOUT = ("expire", "approve", "reject", "escalate")

EPILOG = f"""\b
Environment:
  {URL_VARIABLE}    the server (default {DEFAULT_URL}); --url overrides it
  {TOKEN_VARIABLE}  the API token; --token overrides it. An agent's token for
             ask, create, wait, ...; a reviewer's personal token for
             approve and reject (and list, to see every agent's)
  {SECRET_VARIABLE}
             an event source's secret, for bpm events send and watch
             and the git hooks; --secret overrides it

{EXIT_CODES_HELP}"""


@dataclasses.dataclass(frozen=True)
class Settings:
    url: str
    token: str | None


@click.group(epilog=EPILOG, context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--url",
    envvar=URL_VARIABLE,
    default=DEFAULT_URL,
    show_default=True,
    show_envvar=True,
    metavar="URL",
    help="Breakpoint Manager's base URL.",
)
@click.option(
    "--token",
    envvar=TOKEN_VARIABLE,
    show_envvar=True,
    metavar="TOKEN",
    help="API token (an agent's or a reviewer's).",
)
@click.version_option(__version__, prog_name="bpm")
@click.pass_context
def bpm(ctx: click.Context, url: str, token: str | None) -> None:
    """Ask a human from a script or an agent, and wait for the answer.

    \b
      bpm ask "Deploy to production?" --file plan.md --tag deploy --ttl 3600
      bpm list --status waiting          (as a reviewer)
      bpm approve bp-... -m "Go ahead"   (as a reviewer)
    """
    ctx.obj = Settings(url=url, token=token or None)


def connect(ctx: click.Context) -> Client:
    """The SDK client for this command, closed when the command ends."""
    settings = ctx.find_object(Settings)
    if settings is None or not settings.token:
        raise CliError(f"no API token: pass --token or set {TOKEN_VARIABLE}")
    return ctx.with_resource(Client(settings.url, settings.token))


def breakpoint_options(command: F) -> F:
    """The options that describe a breakpoint (`bpm ask`, `bpm create`)."""
    options = [
        click.option(
            "--file",
            "files",
            metavar="PATH",
            multiple=True,
            help="A file for the reviewer to read (its text is sent; repeatable).",
        ),
        click.option("--tag", "tags", multiple=True, help="A tag (repeatable)."),
        click.option(
            "--expert",
            "experts",
            multiple=True,
            help="Who should decide: a group or user (repeatable).",
        ),
        click.option(
            "--option",
            "options",
            multiple=True,
            help="A choice offered to the reviewer (repeatable).",
        ),
        click.option(
            "--ttl", type=click.IntRange(min=1), metavar="SECONDS", help="Expire after this long."
        ),
        click.option("--title", help="A short title for the reviewer's list."),
        click.option("--run-id", help="The agent's run this belongs to."),
        click.option("--key", help="Canonical key for auto-approval rules (dotted-kebab)."),
        click.option("--strategy", type=click.Choice(typing.get_args(Strategy))),
        click.option(
            "--on-timeout", type=click.Choice(ON_TIMEOUT), help="What happens at the TTL."
        ),
        click.option(
            "--form",
            metavar="FILE",
            help="A JSON Schema (type object) of the answer the reviewer fills in.",
        ),
        click.option(
            "--proposal",
            metavar="FILE",
            help="A JSON object of proposed values: approved as they are, or edited first.",
        ),
        click.option(
            "--idempotency-key",
            metavar="KEY",
            help="Ask once per KEY: the same KEY and question again (a retry, a restarted "
            "script) get the first breakpoint back instead of a new one (for 24 h).",
        ),
    ]
    for option in reversed(options):
        command = option(command)
    return command


def breakpoint_fields(given: Mapping[str, Any]) -> BreakpointFields:
    """The SDK's keyword arguments from the options above (files read now)."""
    experts = list(given["experts"])
    return BreakpointFields(
        files=[read_file(path) for path in given["files"]],
        tags=list(given["tags"]),
        expert=experts[0] if len(experts) == 1 else experts or None,
        options=list(given["options"]) or None,
        ttl=given["ttl"],
        title=given["title"],
        run_id=given["run_id"],
        key=given["key"],
        strategy=given["strategy"],
        on_timeout=given["on_timeout"],
        form=read_json_object(given["form"]) if given.get("form") else None,
        proposal=read_json_object(given["proposal"]) if given.get("proposal") else None,
    )


def read_json_object(path: str) -> dict[str, Any]:
    """A JSON object read from a file (`--form`, `--proposal`)."""
    try:
        with open(path, encoding="utf-8") as file:
            data = json.load(file)
    except FileNotFoundError:
        raise CliError(f"no such file: {path}") from None
    except (OSError, ValueError) as error:
        raise CliError(f"cannot read JSON from {path}: {error}") from None
    if not isinstance(data, dict):
        raise CliError(f"{path}: expected a JSON object")
    return data


def read_file(path: str) -> dict[str, Any]:
    """A context file read now; if it is cut (too long), a warning on stderr says so."""
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", ContextFileCut)
            entry = context_file(path)
        for warning in caught:
            if issubclass(warning.category, ContextFileCut):
                warn(str(warning.message))
        return entry
    except FileNotFoundError:
        raise CliError(f"no such file: {path}") from None
    except IsADirectoryError:
        raise CliError(f"not a file: {path}") from None
    except OSError as error:
        raise CliError(f"cannot read {path}: {error.strerror or error}") from None


def json_option(command: F) -> F:
    return click.option("--json", "as_json", is_flag=True, help="Print JSON on stdout.")(command)

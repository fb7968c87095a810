"""`bpm events`: a breakpoint's history (`bpm events ID`), and events sent to the service's
trigger rules from beside a repository: `send`, `watch`, `hooks install`."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import click
from click.core import ParameterSource

from ..events import githooks
from ..events.sending import (
    DEFAULT_TIMEOUT,
    SECRET_ENV,
    SendError,
    parse_data,
    resolve_secret,
    resolve_url,
    send,
)
from ..events.watching import DEFAULT_DEBOUNCE, Watching, check_watching, watch_and_send
from . import agent
from .app import Settings
from .failures import CliError
from .output import warn

F = TypeVar("F", bound=Callable[..., Any])

HISTORY = "history"


class EventsGroup(click.Group):
    """Its subcommands, and `bpm events ID [--json]`: the history of breakpoint ID, as
    before the subcommands came (a breakpoint's id is never a subcommand's name)."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if args and args[0] not in self.commands and args[0] not in ctx.help_option_names:
            args = [HISTORY, *args]
        return super().parse_args(ctx, args)


@click.group(cls=EventsGroup)
def events() -> None:
    """A breakpoint's history; events for the service's trigger rules.

    \b
      bpm events ID                     the history of breakpoint ID (`bpm events history ID`)
      bpm events send SOURCE TYPE       sign and post one event
      bpm events watch PATH --source S  file changes as file.* events
      bpm events hooks install REPO     git hooks that send git.<hook> events

    Events go to a generic-hmac event source of the server (--url, $BPM_URL), signed with
    its secret: --secret or $BPM_EVENT_SECRET. No API token is needed.
    """


events.add_command(agent.events, name=HISTORY)


@contextmanager
def failures() -> Iterator[None]:
    """A SendError (a HookError too) ends the command as one line: `bpm: error: ...`."""
    try:
        yield
    except SendError as error:
        raise CliError(str(error)) from None


def service_url(ctx: click.Context) -> str:
    """`bpm --url` (or $BPM_URL, or the default), checked."""
    settings = ctx.find_object(Settings)
    return resolve_url(settings.url if settings else None)


def secret_option(command: F) -> F:
    return click.option(
        "--secret",
        envvar=SECRET_ENV,
        show_envvar=True,
        metavar="SECRET",
        help="The event source's secret (shown once, when the source was added).",
    )(command)


@events.command(name="send")
@click.argument("source")
@click.argument("event_type", metavar="TYPE")
@click.option("--data", default="", help="A JSON object, or @file (@- for stdin). Default {}.")
@secret_option
@click.option("--id", "delivery_id", help="The delivery id (default: a random UUID).")
@click.option(
    "--timeout", type=float, default=DEFAULT_TIMEOUT, show_default=True, metavar="SECONDS"
)
@click.option("--json", "as_json", is_flag=True, help="Print {eventId, duplicate} as JSON.")
@click.pass_context
def send_event(
    ctx: click.Context,
    source: str,
    event_type: str,
    data: str,
    secret: str | None,
    delivery_id: str | None,
    timeout: float,
    as_json: bool,
) -> None:
    """Sign (generic-hmac) and post an event of TYPE from SOURCE to /api/events/SOURCE.

    Prints the stored event's id, and whether the service had it already (the same --id
    again: a duplicate, stored once).
    """
    with failures():
        sent = send(
            url=service_url(ctx),
            source=source,
            event_type=event_type,
            data=parse_data(data),
            secret=resolve_secret(secret, source),
            delivery_id=delivery_id,
            timeout=timeout,
        )
    click.echo(json.dumps(sent.as_dict()) if as_json else sent.line())


@events.command(name="watch")
@click.argument("path")
@click.option("--source", required=True, help="The event source's name.")
@secret_option
@click.option(
    "--debounce",
    type=float,
    default=DEFAULT_DEBOUNCE,
    show_default=True,
    metavar="SECONDS",
    help="Seconds without a change before a file's event is sent.",
)
@click.option("--once", is_flag=True, help="Exit after the first event is sent.")
@click.pass_context
def watch(
    ctx: click.Context, path: str, source: str, secret: str | None, debounce: float, once: bool
) -> None:
    """Send file.created, file.modified and file.deleted events for PATH.

    PATH is a folder (watched recursively) or one file; each event's data is {path,
    sha256, size}. Several writes within the --debounce window are one event. Ctrl-C or
    SIGTERM stops it. Needs watchdog, the `watch` extra (without it, bpm says how to install it).
    """
    with failures():
        watching = Watching(
            target=check_watching(path, debounce),
            url=service_url(ctx),
            source=source,
            secret=resolve_secret(secret, source),
            debounce=debounce,
            once=once,
        )
        watch_and_send(watching, say=_say, complain=warn)


def _say(line: str) -> None:
    click.echo(line)  # a line at a time: a reader of a pipe sees each event as it is sent


@events.group()
def hooks() -> None:
    """Git hooks that send git.post-commit, git.post-merge and git.pre-push events."""


@hooks.command(name="install")
@click.argument("repo", type=click.Path(path_type=Path))
@click.option("--source", default="git", show_default=True, help="The event source.")
@click.option(
    "--secret-env",
    default=SECRET_ENV,
    show_default=True,
    metavar="NAME",
    help="The variable that holds the source's secret when a hook runs.",
)
@click.option(
    "--timeout",
    type=float,
    default=DEFAULT_TIMEOUT,
    show_default=True,
    metavar="SECONDS",
    help="Each send's HTTP timeout (at most 60).",
)
@click.option("--force", is_flag=True, help="Replace hooks this did not write (kept aside).")
@click.pass_context
def install(
    ctx: click.Context, repo: Path, source: str, secret_env: str, timeout: float, force: bool
) -> None:
    """Write post-commit, post-merge and pre-push hooks into REPO.

    Each sends git.<hook> events ({ref, sha, branch, repo}) with `bpm events send`, in the
    background: a hook never blocks nor fails git (its output: .git/bpm-hooks.log). The
    secret is read from $BPM_EVENT_SECRET (or --secret-env's) when a hook runs, never
    written down. `bpm --url URL` writes URL into the hooks; without it they read $BPM_URL
    when they run.
    """
    url = service_url(ctx) if _url_given(ctx) else None
    with failures():
        installed = githooks.install(
            repo.resolve(),
            source=source,
            url=url,
            secret_env=secret_env,
            force=force,
            timeout=timeout,
        )
    for line in githooks.report(installed, source=source, url=url, secret_env=secret_env):
        click.echo(line)


def _url_given(ctx: click.Context) -> bool:
    """Whether `bpm --url` was typed (not $BPM_URL, not the default)."""
    root = ctx.find_root()
    return root.get_parameter_source("url") == ParameterSource.COMMANDLINE

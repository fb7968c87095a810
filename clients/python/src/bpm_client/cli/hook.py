"""`bpm hook claude-code|codex`: an agent host's PermissionRequest hook, answered by a
reviewer here (see agent_hosts.py).

The hook never allows by itself: when nobody decides (the service is down or refuses the
token, the wait runs out, the breakpoint expires or is cancelled) or its input is not a
permission request, it prints no decision and exits 0, and the host asks its own user.
Each such case says why in one line on stderr.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from typing import Any

import click

from ..agent_hosts import (
    HOSTS,
    HookInputError,
    Host,
    PermissionRequest,
    breakpoint_fields,
    host_decision,
    idempotency_key,
    permission_request,
    refuses_the_form,
)
from ..client import Client
from ..errors import BpmError, ValidationError, WaitTimeout
from ..models import Breakpoint, BreakpointResult
from ..steps import Retry
from .app import Settings

FALLBACK = "no decision: {host} asks you instead"
# A person waits at the host's prompt meanwhile: a service that does not answer the
# create after two resends (about two seconds) is down, and the host asks them itself.
CREATE_RETRY = Retry(attempts=2)
TOO_LARGE = (
    "the tool's input is beyond what a form takes: asking with it attached, to approve as it is"
)


@click.group()
def hook() -> None:
    """Agent hosts' permission prompts (their PermissionRequest hooks) decided here.

    \b
    In .claude/settings.json:
      {"hooks": {"PermissionRequest": [{"matcher": "Bash", "hooks": [{"type": "command",
        "command": "bpm hook claude-code --ttl 3600", "timeout": 3600}]}]}}
    Codex: the same in .codex/hooks.json, with `bpm hook codex`.
    """


def host_command(host: Host) -> click.Command:
    summary = (
        f"{host.label}'s PermissionRequest hook: ask a reviewer about the tool call on stdin, "
        f"wait, and print {host.label}'s decision (allow, or deny with the reviewer's "
        "comment). Nothing is allowed that a reviewer did not approve: when nobody decides, "
        f"or the service cannot be reached, it prints nothing and exits 0, and {host.label} "
        "asks you as usual."
    )

    @click.command(name=host.name, help=summary)
    @click.option(
        "--timeout",
        type=click.FloatRange(min=0, min_open=True),
        metavar="SECONDS",
        help=f"Stop waiting after this long: no decision ({host.label} asks its user; the "
        "breakpoint keeps waiting). By default, until the host stops the hook.",
    )
    @click.option(
        "--ttl",
        type=click.IntRange(min=1),
        metavar="SECONDS",
        help="The breakpoint expires after this long (best: the hook's timeout).",
    )
    @click.option("--tag", "tags", multiple=True, help=f"A tag besides {host.name} (repeatable).")
    @click.option(
        "--expert",
        "experts",
        multiple=True,
        help="Who should decide: a group or user (repeatable).",
    )
    @click.pass_obj
    def command(
        settings: Settings,
        timeout: float | None,
        ttl: int | None,
        tags: tuple[str, ...],
        experts: tuple[str, ...],
    ) -> None:
        stdin = sys.stdin.buffer.read()
        decision = answer(
            host, stdin, settings, timeout=timeout, ttl=ttl, tags=tags, experts=experts
        )
        if decision is not None:
            click.echo(json.dumps(decision, ensure_ascii=False))

    return command


def answer(
    host: Host,
    stdin: bytes,
    settings: Settings,
    *,
    timeout: float | None,
    ttl: int | None,
    tags: tuple[str, ...],
    experts: tuple[str, ...],
) -> dict[str, Any] | None:
    """The host's decision JSON, or None after a line on stderr saying why there is none."""
    try:
        request = permission_request(stdin)
    except HookInputError as error:
        note(host, str(error))
        return None
    options = Options(timeout=timeout, ttl=ttl, tags=tags, experts=experts)
    try:
        with Client(settings.url, settings.token, retry=CREATE_RETRY) as client:
            try:
                result = ask(client, host, request, options, editable=True)
            except ValidationError as error:
                if not refuses_the_form(error.details):
                    raise
                click.echo(f"bpm hook {host.name}: {TOO_LARGE}", err=True)
                result = ask(client, host, request, options, editable=False)
    except WaitTimeout as error:
        note(host, f"nobody decided {error.breakpoint_id} within {error.timeout:g} s")
        return None
    except BpmError as error:
        note(host, " ".join(str(error).split()))
        return None
    except KeyboardInterrupt:
        note(host, "interrupted")
        return None
    decision = host_decision(host, result)
    if decision is None:
        note(host, why_undecided(result))
    return decision


@dataclasses.dataclass(frozen=True)
class Options:
    """The command's options for the breakpoint and the wait."""

    timeout: float | None
    ttl: int | None
    tags: tuple[str, ...]
    experts: tuple[str, ...]


def ask(
    client: Client, host: Host, request: PermissionRequest, options: Options, *, editable: bool
) -> BreakpointResult:
    """Open the request's breakpoint (or find the one it opened before) and wait."""
    question, fields = breakpoint_fields(
        host,
        request,
        tags=options.tags,
        experts=options.experts,
        ttl=options.ttl,
        editable=editable,
    )
    return client.breakpoint(
        question,
        timeout=options.timeout,
        idempotency_key=idempotency_key(host, request, question, fields),
        on_created=lambda created: announce(host, created),
        **fields,
    )


def announce(host: Host, created: Breakpoint) -> None:
    for warning in created.warnings:
        click.echo(f"bpm hook {host.name}: warning: {warning}", err=True)
    if not created.done:
        click.echo(
            f"bpm hook {host.name}: asked {created.breakpoint_id}, waiting for a decision",
            err=True,
        )


def why_undecided(result: BreakpointResult) -> str:
    if result.verified is False:
        return f"the receipt of {result.breakpoint_id}'s decision did not verify"
    return f"{result.breakpoint_id} was {result.status}"


def note(host: Host, why: str) -> None:
    """One line on stderr: why the host gets no decision."""
    fallback = FALLBACK.format(host=host.label)
    click.echo(f"bpm hook {host.name}: {why}; {fallback}", err=True)


for _host in HOSTS.values():
    hook.add_command(host_command(_host))

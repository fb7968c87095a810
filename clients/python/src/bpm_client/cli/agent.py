"""The agent's commands: ask, create, wait, status, cancel, events, list."""

from __future__ import annotations

import itertools
from typing import Any

import click

from ..errors import WaitTimeout
from ..models import Breakpoint, BreakpointResult, to_wire
from ..operations import result_of
from .app import breakpoint_fields, breakpoint_options, connect, json_option
from .failures import Interrupted, StillWaiting
from .output import dumps, event_line, exit_code, summary, table, warn_about

STATUSES = ("waiting", "released", "expired", "cancelled")

timeout_option = click.option(
    "--timeout",
    type=click.FloatRange(min=0, min_open=True),
    metavar="SECONDS",
    help="Stop waiting after this long: exit 3 (the breakpoint keeps waiting).",
)


@click.command()
@click.argument("question")
@breakpoint_options
@timeout_option
@click.option(
    "--cancel-on-interrupt",
    is_flag=True,
    help="On Ctrl-C, cancel the breakpoint (by default it keeps waiting).",
)
@json_option
@click.pass_context
def ask(
    ctx: click.Context,
    question: str,
    timeout: float | None,
    cancel_on_interrupt: bool,
    as_json: bool,
    **given: Any,
) -> int:
    """Ask QUESTION and wait for a human's decision.

    While it waits, says on stderr how long people usually take to answer such a question
    ("usually answered in about 4 min (p90 22 min)"), when the server knows. Prints the
    decision (`approved by alice: "go ahead"`) or, with --json, the
    BreakpointResult; the exit code says it too (see `bpm --help`).
    """
    key = given.pop("idempotency_key")
    fields = breakpoint_fields(given)
    client = connect(ctx)
    created: list[str] = []

    def announce(breakpoint: Breakpoint) -> None:
        created.append(breakpoint.breakpoint_id)
        warn_about(breakpoint)
        if not breakpoint.done:  # else an auto-approval rule decided at once
            click.echo(f"created {breakpoint.breakpoint_id}, waiting for a decision", err=True)
            if breakpoint.expected_decision is not None:  # enough history to say
                click.echo(breakpoint.expected_decision.describe(), err=True)

    try:
        result = client.breakpoint(
            question,
            timeout=timeout,
            cancel_on_interrupt=cancel_on_interrupt,
            idempotency_key=key,
            on_created=announce,
            **fields,
        )
    except WaitTimeout as error:
        raise still_waiting(created[0], error) from None
    except KeyboardInterrupt:
        raise interrupted(created[0] if created else None, cancelled=cancel_on_interrupt) from None
    return report(result, as_json)


@click.command()
@click.argument("question")
@breakpoint_options
@json_option
@click.pass_context
def create(ctx: click.Context, question: str, as_json: bool, **given: Any) -> None:
    """Create a breakpoint without waiting and print its id (--json: all of it)."""
    key = given.pop("idempotency_key")
    fields = breakpoint_fields(given)
    created = connect(ctx).create(question, idempotency_key=key, **fields)
    warn_about(created)
    click.echo(dumps(to_wire(created)) if as_json else created.breakpoint_id)


@click.command()
@click.argument("breakpoint_id", metavar="ID")
@timeout_option
@json_option
@click.pass_context
def wait(ctx: click.Context, breakpoint_id: str, timeout: float | None, as_json: bool) -> int:
    """Wait for the decision on breakpoint ID (exit codes as `bpm ask`)."""
    client = connect(ctx)
    click.echo(f"waiting for a decision on {breakpoint_id}", err=True)
    try:
        status = client.wait(breakpoint_id, timeout)
    except WaitTimeout as error:
        raise still_waiting(breakpoint_id, error) from None
    except KeyboardInterrupt:
        raise interrupted(breakpoint_id, cancelled=False) from None
    return report(result_of(breakpoint_id, status), as_json)


def still_waiting(breakpoint_id: str, error: WaitTimeout) -> StillWaiting:
    return StillWaiting(
        f"still waiting after {error.timeout:g} s: {breakpoint_id} "
        f"(`bpm wait {breakpoint_id}` waits again)"
    )


def interrupted(breakpoint_id: str | None, *, cancelled: bool) -> Interrupted:
    if breakpoint_id is None:
        return Interrupted("interrupted before the breakpoint was created")
    if cancelled:
        return Interrupted(f"interrupted; cancelled {breakpoint_id}")
    return Interrupted(
        f"interrupted; {breakpoint_id} is still waiting (`bpm cancel {breakpoint_id}` cancels it)"
    )


def report(result: BreakpointResult, as_json: bool) -> int:
    click.echo(dumps(result.to_json()) if as_json else summary(result))
    return exit_code(result)


@click.command()
@click.argument("breakpoint_id", metavar="ID")
@json_option
@click.pass_context
def status(ctx: click.Context, breakpoint_id: str, as_json: bool) -> None:
    """Print the status (and decision) of breakpoint ID."""
    answer = connect(ctx).status(breakpoint_id)
    if as_json:
        click.echo(dumps(to_wire(answer)))
    else:
        click.echo(summary(result_of(breakpoint_id, answer)) if answer.done else answer.status)


@click.command()
@click.argument("breakpoint_id", metavar="ID")
@click.option("--reason", help="Why (recorded in the result's feedback).")
@click.pass_context
def cancel(ctx: click.Context, breakpoint_id: str, reason: str | None) -> None:
    """Cancel breakpoint ID (cancelling a cancelled one again is fine)."""
    click.echo(connect(ctx).cancel(breakpoint_id, reason))


@click.command()
@click.argument("breakpoint_id", metavar="ID")
@json_option
@click.pass_context
def events(ctx: click.Context, breakpoint_id: str, as_json: bool) -> None:
    """Print the history of breakpoint ID, oldest first."""
    found = connect(ctx).events(breakpoint_id)
    if as_json:
        click.echo(dumps(to_wire(found)))
    else:
        for event in found:
            click.echo(event_line(event))


@click.command(name="list")
@click.option("--status", type=click.Choice(STATUSES))
@click.option(
    "--tag", "tags", multiple=True, help="Only with this tag (repeatable: all must match)."
)
@click.option("--agent-id", help="Only this agent's.")
@click.option("--run-id", help="Only this run's.")
@click.option("--search", help="Text in the title or question.")
@click.option("--limit", type=click.IntRange(min=1), default=20, show_default=True)
@json_option
@click.pass_context
def list_(
    ctx: click.Context,
    status: str | None,
    tags: tuple[str, ...],
    agent_id: str | None,
    run_id: str | None,
    search: str | None,
    limit: int,
    as_json: bool,
) -> None:
    """List breakpoints, newest first: what became of each (approved, rejected, the
    option chosen, expired, cancelled) and who decided.

    An agent's token sees its own breakpoints; a reviewer's, everyone's. --json prints
    the API's representation of each.
    """
    found = connect(ctx).list(
        status=status,
        tags=tags,
        agent_id=agent_id,
        run_id=run_id,
        search=search,
        page_size=min(limit, 200),
    )
    rows = list(itertools.islice(found, limit))
    if as_json:
        click.echo(dumps(to_wire(rows)))
    elif rows:
        click.echo(table(rows))
    else:
        click.echo("no breakpoints found", err=True)

"""`bpm`: Breakpoint Manager from the shell (entry point `main`)."""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

import click

from ..errors import BpmError
from . import agent, babysitter, events, gateway, hook, reviewer, rules, verify
from .app import bpm
from .failures import BROKEN_PIPE, FAILED, INTERRUPTED, CliError

for _command in (
    agent.ask,
    agent.create,
    agent.wait,
    agent.status,
    agent.cancel,
    events.events,
    agent.list_,
    reviewer.approve,
    reviewer.reject,
    reviewer.mcp,
    gateway.gateway,
    rules.rules,
    babysitter.babysitter,
    hook.hook,
    verify.verify,
):
    bpm.add_command(_command)


def main(args: Sequence[str] | None = None) -> int:
    """Run `bpm`; every failure ends as one line on stderr and an exit code (no traceback)."""
    try:
        code = bpm.main(args, prog_name="bpm", standalone_mode=False)
    except CliError as error:
        error.show()
        return error.exit_code
    except click.ClickException as error:  # usage errors: exit 4, not click's 2
        error.show()
        return FAILED
    except click.Abort:
        click.echo("bpm: interrupted", err=True)
        return INTERRUPTED
    except BpmError as error:
        click.echo(f"bpm: error: {' '.join(str(error).split())}", err=True)
        return FAILED
    except BrokenPipeError:
        # The reader went away (`bpm list | head -1`): silence the flush at exit.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return BROKEN_PIPE
    return code if isinstance(code, int) else 0


__all__ = ["bpm", "main"]

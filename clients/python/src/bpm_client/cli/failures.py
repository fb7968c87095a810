"""Exit codes of `bpm`, and the errors that end a command with one line on stderr."""

from __future__ import annotations

from typing import IO, Any

import click

APPROVED = 0
REJECTED = 1
ENDED = 2  # expired or cancelled
STILL_WAITING = 3  # the --timeout ran out first
FAILED = 4  # usage, authentication, server or connection error
INTERRUPTED = 130  # Ctrl-C (128 + SIGINT), as shells report it
BROKEN_PIPE = 141  # stdout closed early (128 + SIGPIPE): `bpm list | head -1`

EXIT_CODES_HELP = f"""\b
Exit codes of `bpm ask` and `bpm wait`:
  {APPROVED}    approved
  {REJECTED}    rejected
  {ENDED}    expired or cancelled
  {STILL_WAITING}    still waiting when --timeout ran out
  {FAILED}    usage, authentication or server error, unreachable server
  {INTERRUPTED}  interrupted (Ctrl-C)
Other commands exit {APPROVED} on success and {FAILED} on error."""


class CliError(click.ClickException):
    """A failure reported as one line on stderr (`bpm: error: ...`), no traceback."""

    exit_code = FAILED
    prefix = "error: "

    def show(self, file: IO[Any] | None = None) -> None:
        click.echo(f"bpm: {self.prefix}{self.format_message()}", file=file, err=True)


class StillWaiting(CliError):
    """The caller's --timeout passed before anyone decided (the breakpoint keeps waiting)."""

    exit_code = STILL_WAITING
    prefix = ""


class Interrupted(CliError):
    """Ctrl-C while waiting."""

    exit_code = INTERRUPTED
    prefix = ""

"""`bpm babysitter watch`: answer babysitter runs' breakpoints through Breakpoint Manager."""

from __future__ import annotations

from pathlib import Path

import click

from ..babysitter import Babysitter, Bridge, runs_dir_of
from ..babysitter.runs import RUNS_DIR_VARIABLE
from .app import connect

BABYSITTER_VARIABLE = "BPM_BABYSITTER"


@click.group()
def babysitter() -> None:
    """babysitter runs (@a5c-ai/babysitter-sdk) answered through this service."""


@babysitter.command()
@click.argument(
    "project_dir",
    default=".",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
)
@click.option("--once", is_flag=True, help="Answer what is pending now, then exit.")
@click.option(
    "--drive",
    is_flag=True,
    help="Also run `babysitter run:iterate` on the runs (headless runs that no agent "
    "session drives) until each completes or fails; then exit (1 if one failed).",
)
@click.option(
    "--run",
    "run_ids",
    multiple=True,
    metavar="RUN_ID",
    help="Only this run (repeatable); by default every run of the project.",
)
@click.option(
    "--runs-dir",
    envvar=RUNS_DIR_VARIABLE,
    show_envvar=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="Where the runs are (default PROJECT_DIR/.a5c/runs).",
)
@click.option(
    "--interval",
    type=click.FloatRange(min=0.1),
    default=5.0,
    show_default=True,
    metavar="SECONDS",
    help="How often to look for new breakpoints (decisions are posted at once).",
)
@click.option(
    "--babysitter",
    "command",
    envvar=BABYSITTER_VARIABLE,
    show_envvar=True,
    metavar="COMMAND",
    help="How to run the babysitter CLI (default: the project's node_modules/.bin/"
    "babysitter, else babysitter on PATH).",
)
@click.pass_context
def watch(
    ctx: click.Context,
    project_dir: Path,
    once: bool,
    drive: bool,
    run_ids: tuple[str, ...],
    runs_dir: Path | None,
    interval: float,
    command: str | None,
) -> int:
    """Ask this service for every pending breakpoint of the runs in PROJECT_DIR and post
    each decision back to its run (an agent's token; the effect id is the idempotency key,
    so a restarted watch never asks twice).

    \b
      bpm babysitter watch                 # until Ctrl-C
      bpm babysitter watch . --drive       # headless: also iterate the runs to their end
    """
    if once and drive:
        raise click.UsageError("--once and --drive do not go together")
    project = project_dir.resolve()
    bridge = Bridge(
        connect(ctx),
        Babysitter.locate(project, command),
        project,
        runs_dir=runs_dir_of(project, runs_dir),
        run_ids=run_ids,
        drive=drive,
        interval=interval,
        note=lambda line: click.echo(f"bpm babysitter: {line}", err=True),
    )
    return bridge.run(once=once)

"""babysitter runs answered through Breakpoint Manager (`bpm babysitter watch`).

babysitter processes call `ctx.breakpoint(...)`; the run stops at a pending breakpoint
effect. The bridge asks this service for each one and posts the decision back with the
SDK's own CLI (`babysitter task:post`), so the process receives it unchanged.
"""

from .bridge import Bridge
from .mapping import breakpoint_request, run_answer
from .runs import Babysitter, BabysitterFailed, Effect, Run, find_runs, runs_dir_of

__all__ = [
    "Babysitter",
    "BabysitterFailed",
    "Bridge",
    "Effect",
    "Run",
    "breakpoint_request",
    "find_runs",
    "run_answer",
    "runs_dir_of",
]

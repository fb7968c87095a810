"""The bridge: each pending babysitter breakpoint asked here once, the decisions posted back.

A round: (with `drive`) iterate the runs that can move on; scan every run for pending
breakpoint effects and ask for the new ones; withdraw (cancel) what a run no longer waits
for; then wait for decisions on everything asked, in one wait-for-many long-poll, and post
each decision to its run.

Nothing is kept on disk: the effect id is the breakpoint's idempotency key and one of its
tags, so a restarted bridge finds its breakpoints again (`recover`, then `ask` looks before
it creates) and never asks twice.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ..client import Client
from ..errors import (
    ConnectionFailed,
    IdempotencyConflict,
    InvalidState,
    NotFound,
    PayloadTooLarge,
    ServerError,
    Throttled,
    Unavailable,
    ValidationError,
    WaitTimeout,
)
from ..models import Breakpoint, StatusEntry
from ..operations import MAX_IDS_PER_WAIT
from .mapping import TAG, breakpoint_request, refused_answer, run_answer
from .runs import Babysitter, BabysitterFailed, Effect, Run, find_runs

# Failures that pass: the round is tried again after the interval.
PASSING = (ConnectionFailed, Unavailable, ServerError, Throttled, BabysitterFailed)
# The service will not store this breakpoint: the run hears why, as a rejection.
REFUSED = (ValidationError, PayloadTooLarge, IdempotencyConflict)
WITHDRAWN = "answered in the babysitter run first"


@dataclasses.dataclass
class Asked:
    """A pending effect and the breakpoint that asks it here."""

    effect: Effect
    breakpoint_id: str


@dataclasses.dataclass
class Driven:
    """A run the bridge iterates (`drive`): whether to iterate it next round, its end."""

    again: bool = True
    until_ms: float | None = None  # a ctx.sleepUntil the run waits for
    state: str | None = None  # 'completed' or 'failed'

    def due(self) -> bool:
        return self.again or (self.until_ms is not None and time.time() * 1000 >= self.until_ms)


class Bridge:
    """Answers the breakpoints of the runs under `runs_dir` (only `run_ids`, when given).

    `drive`: also iterate the runs (headless runs that no agent session drives) until
    each completes or fails. `interval`: seconds between scans of the runs (a decision is
    posted as soon as it is made). `note`: where progress lines go.
    """

    def __init__(
        self,
        client: Client,
        babysitter: Babysitter,
        project_dir: Path,
        *,
        runs_dir: Path,
        run_ids: Sequence[str] = (),
        drive: bool = False,
        interval: float = 5.0,
        note: Callable[[str], None] = print,
    ):
        self.client = client
        self.babysitter = babysitter
        self.project_dir = project_dir
        self.runs_dir = runs_dir
        self.run_ids = list(run_ids)
        self.drive = drive
        self.interval = interval
        self.note = note
        self.asked: dict[str, Asked] = {}  # by effect id
        self.driven: dict[Path, Driven] = {}

    def run(self, *, once: bool = False) -> int:
        """Answer until stopped; `once`: what is pending now, then return. With `drive`,
        return when every run has ended: 0 when all completed, 1 when one failed."""
        recovered = scanned = False
        while True:
            try:
                if not recovered:
                    self.recover()
                    recovered = True
                if self.drive:
                    self.advance()
                self.scan(ask_new=not (once and scanned))
                scanned = True
                if self.finished(once):
                    return 1 if any(d.state == "failed" for d in self.driven.values()) else 0
                self.wait_round()
            except PASSING as error:
                self.note(f"{error}; trying again in {self.interval:g} s")
                time.sleep(self.interval)

    def runs(self) -> list[Run]:
        return find_runs(self.runs_dir, self.run_ids)

    def finished(self, once: bool) -> bool:
        if self.asked:
            return False
        if self.drive:
            return all(driven.state for driven in self.driven.values())
        return once

    # --- the runs ----------------------------------------------------------------------

    def recover(self) -> None:
        """Take back the waiting breakpoints a previous bridge asked for these runs."""
        runs = {run.run_id: run for run in self.runs()}
        for found in self.client.list(status="waiting", tags=[TAG]):
            run = runs.get(found.run_id or "")
            effect = self._effect_of(found, run) if run else None
            if effect is not None and effect.effect_id not in self.asked:
                self.asked[effect.effect_id] = Asked(effect, found.breakpoint_id)
                self.note(f"{found.breakpoint_id} still asks {_where(effect)}")

    @staticmethod
    def _effect_of(found: Breakpoint, run: Run) -> Effect | None:
        for tag in found.tags:
            task = run.task(tag) if tag != TAG else None
            if task is not None and task.get("kind") == "breakpoint":
                return Effect.of(run, task)
        return None

    def advance(self) -> None:
        """Iterate each run that can move on (new, answered, or its sleep is over)."""
        for run in self.runs():
            driven = self.driven.setdefault(run.path, Driven())
            if driven.state:
                continue
            driven.state = run.state()
            if driven.state is None and driven.due():
                try:
                    answer = self.babysitter.iterate(run)
                except BabysitterFailed as error:  # this run only: the others go on
                    self.note(f"run {run.run_id}: {error}")
                    continue
                status = answer.get("status")
                driven.state = status if status in ("completed", "failed") else None
                driven.again = status == "executed"  # tasks ran: it can move on at once
                until = answer.get("until")
                driven.until_ms = until if isinstance(until, int | float) else None
            if driven.state:
                self.note(f"run {run.run_id} {driven.state}")

    def scan(self, *, ask_new: bool = True) -> None:
        """Ask for each new pending effect; withdraw the ones a run no longer waits for."""
        for run in self.runs():
            ended = run.state()
            try:
                pending = [] if ended else self.babysitter.pending_breakpoints(run)
            except BabysitterFailed as error:  # this run only: the others go on
                self.note(f"run {run.run_id}: {error}")
                continue
            waiting = {effect.effect_id for effect in pending}
            for asked in list(self.asked.values()):
                if asked.effect.run == run and asked.effect.effect_id not in waiting:
                    self.withdraw(asked, f"the babysitter run {ended}" if ended else WITHDRAWN)
            for effect in pending:
                if ask_new and effect.effect_id not in self.asked:
                    self.ask(effect)

    # --- the service -------------------------------------------------------------------

    def ask(self, effect: Effect) -> None:
        """The effect's breakpoint: found again if it exists (any status), else created,
        with the effect id as the idempotency key."""
        search = self.client.list(tags=[TAG, effect.effect_id], run_id=effect.run.run_id)
        found = next(iter(search), None)
        if found is not None:
            self.note(f"{found.breakpoint_id} ({found.status}) asks {_where(effect)}")
        else:
            request = breakpoint_request(effect, self.project_dir)
            try:
                found = self.client.create(
                    idempotency_key=effect.effect_id,
                    payload=request["payload"],
                    title=request["title"],
                    tags=request["tags"],
                    run_id=request["run_id"],
                )
            except REFUSED as error:
                self.note(f"refused, {_where(effect)}: {error}")
                self.post(effect, refused_answer(error.message))
                return
            self.note(f"asked {found.breakpoint_id} for {_where(effect)}: {found.question}")
        self.asked[effect.effect_id] = Asked(effect, found.breakpoint_id)

    def withdraw(self, asked: Asked, reason: str) -> None:
        """The run no longer waits (answered in the agent's chat, or it ended): cancel the
        question here."""
        del self.asked[asked.effect.effect_id]
        try:
            self.client.cancel(asked.breakpoint_id, reason)
        except (InvalidState, NotFound):
            self.note(f"{asked.breakpoint_id} was decided here too; the run's answer stands")
            return
        self.note(f"cancelled {asked.breakpoint_id} ({_where(asked.effect)}): {reason}")

    def wait_round(self) -> None:
        """Wait up to `interval` for decisions (one long-poll for up to 100); post them."""
        if not self.asked:
            time.sleep(self.interval)
            return
        by_breakpoint = {asked.breakpoint_id: asked for asked in self.asked.values()}
        ids = list(by_breakpoint)[:MAX_IDS_PER_WAIT]
        try:
            entries = self.client.wait_any(ids, timeout=self.interval)
        except WaitTimeout:
            return
        failed = False
        for entry in (entry for entry in entries if entry.done or entry.error):
            asked = by_breakpoint[entry.breakpoint_id]
            try:
                self.answer(asked, entry)
            except BabysitterFailed as error:  # posted again next round
                self.note(f"{_where(asked.effect)}: {error}")
                failed = True
        if failed:
            time.sleep(self.interval)

    def answer(self, asked: Asked, entry: StatusEntry) -> None:
        self.post(asked.effect, run_answer(entry))
        del self.asked[asked.effect.effect_id]

    def post(self, effect: Effect, value: dict[str, Any]) -> None:
        verdict = "approved" if value.get("approved") else f"not approved ({value['status']})"
        if self.babysitter.post(effect, value):
            self.note(f"answered {_where(effect)}: {verdict}")
        else:
            self.note(f"{_where(effect)} was answered in the run first; that answer stands")
        driven = self.driven.get(effect.run.path)
        if driven is not None:
            driven.again = True


def _where(effect: Effect) -> str:
    return f"run {effect.run.run_id} effect {effect.effect_id}"

"""`bpm rules`: auto-approval rules, as an admin (`bpm rules simulate`)."""

from __future__ import annotations

import click

from ..models import RuleReplay
from .app import connect
from .failures import REJECTED
from .output import dumps

AFTER_N = "autoApproveAfterN"
ACTIONS = ("auto-approve", "never-auto-approve", AFTER_N)
FIGURES = (
    ("considered", "considered"),
    ("matched", "matched"),
    ("wouldAutoApprove", "would_auto_approve"),
    ("agreedWithHumans", "agreed_with_humans"),
    ("humanApproved", "human_approved"),
    ("humanRejected", "human_rejected"),
)


@click.group()
def rules() -> None:
    """Auto-approval rules (needs an admin's token)."""


@rules.command()
@click.argument("pattern", required=False)
@click.option("--action", type=click.Choice(ACTIONS), help="Default: auto-approve.")
@click.option("--key", help=f"{AFTER_N} only: the key it applies to.")
@click.option("--n", "n", type=int, help=f"{AFTER_N} only: the approvals in a row it needs.")
@click.option("--since", help="An ISO 8601 time or a duration: 90d (default), 12h, 2w.")
@click.option("--json", "as_json", is_flag=True, help="Print the API's answer as JSON.")
@click.option(
    "--fail-on-rejected",
    is_flag=True,
    help=f"Exit {REJECTED} when the rule would have auto-approved anything a person rejected.",
)
@click.pass_context
def simulate(
    ctx: click.Context,
    pattern: str | None,
    action: str | None,
    key: str | None,
    n: int | None,
    since: str | None,
    as_json: bool,
    fail_on_rejected: bool,
) -> None:
    """Replay a rule over the decisions already made, with the rules that exist now.

    \b
      bpm rules simulate 'deploy.staging(tags contains "docs")' --since 30d
      bpm rules simulate --action autoApproveAfterN --key plan-review --n 3
      bpm rules simulate 'deploy.*' --fail-on-rejected    (in CI, before adding it)

    Nothing is saved. With --fail-on-rejected it exits 1 when the rule would have
    auto-approved a breakpoint a person rejected.
    """
    replay = connect(ctx).simulate_rule(pattern, action=action, key=key, n=n, since=since)
    click.echo(dumps(replay.to_json()) if as_json else summary(replay))
    if fail_on_rejected and replay.rejected_but_would_approve_count:
        ctx.exit(REJECTED)


def summary(replay: RuleReplay) -> str:
    """The figures one a line, then the rejections it would have approved, newest first."""
    rule = replay.rule
    described = rule.pattern if rule.pattern is not None else f"{rule.key} after {rule.n}"
    lines = [f"rule: {rule.action} {described}", f"since: {replay.to_json()['since']}"]
    lines += [f"{wire}: {getattr(replay, name)}" for wire, name in FIGURES]
    listed = replay.rejected_but_would_approve
    lines.append(
        f"rejectedButWouldApprove: {replay.rejected_but_would_approve_count}"
        + (f" (the newest {len(listed)} below)" if listed else "")
    )
    for item in listed:
        by = (
            item.responded_by
            if isinstance(item.responded_by, str)
            else ", ".join(item.responded_by)
        )
        lines.append(f"  {item.breakpoint_id}  {item.key}  by {by}: {item.feedback or ''}")
    return "\n".join(lines)

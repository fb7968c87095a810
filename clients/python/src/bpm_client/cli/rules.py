"""`bpm rules`: auto-approval rules, as an admin (`bpm rules simulate`)."""

from __future__ import annotations

import click

from ..models import RuleReplay
from .app import connect
from .failures import REJECTED
from .output import dumps, moment, quoted

AFTER_N = "autoApproveAfterN"
ACTIONS = ("auto-approve", "never-auto-approve", AFTER_N)
# As `manage.py simulate_rule --fail-on-rejected` says it.
WOULD_APPROVE_REJECTED = "the rule would have auto-approved {count} breakpoint(s) a person rejected"


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
    auto-approved a breakpoint a person rejected, and says so on stderr. --json prints the
    API's answer, its field names as they are.
    """
    replay = connect(ctx).simulate_rule(pattern, action=action, key=key, n=n, since=since)
    click.echo(dumps(replay.to_json()) if as_json else summary(replay))
    count = replay.rejected_but_would_approve_count
    if fail_on_rejected and count:
        click.echo(f"bpm: {WOULD_APPROVE_REJECTED.format(count=count)}", err=True)
        ctx.exit(REJECTED)


def summary(replay: RuleReplay) -> str:
    """What the rule would have done, in words (the API's field names are --json's), then
    the rejections it would have approved, newest first."""
    matched = replay.matched
    lines = [
        f"rule: {described(replay)}",
        f"since {moment(replay.since)}: {counted(replay.considered, 'finished breakpoint')}, "
        f"of which the rule matches {matched}",
        f"of those {matched}, a person approved {replay.human_approved} "
        f"and rejected {replay.human_rejected}",
        would_approve(replay),
    ]
    if replay.grant_approved:  # a reviewer's grants approved some: nobody's decision
        lines.insert(3, f"of those {matched}, a reviewer's grant approved {replay.grant_approved}")
    listed = replay.rejected_but_would_approve
    if listed:
        lines.append(f"{which_listed(len(listed), replay.rejected_but_would_approve_count)}:")
    for item in listed:
        by = (
            item.responded_by
            if isinstance(item.responded_by, str)
            else ", ".join(item.responded_by)
        )
        feedback = f": {quoted(item.feedback)}" if item.feedback else ""
        lines.append(f"  {item.breakpoint_id}  {item.key}  rejected by {by}{feedback}")
    return "\n".join(lines)


def would_approve(replay: RuleReplay) -> str:
    """`would approve 8, of which 1 a person rejected and 6 a person approved`."""
    if not replay.would_auto_approve:
        return "would approve none of them"
    return (
        f"would approve {replay.would_auto_approve}, of which "
        f"{replay.rejected_but_would_approve_count} a person rejected "
        f"and {replay.agreed_with_humans} a person approved"
    )


def described(replay: RuleReplay) -> str:
    """`auto-approve deploy.*`, or `autoApproveAfterN: plan-review after 3 approvals in a row`."""
    rule = replay.rule
    if rule.pattern is not None:
        return f"{rule.action} {rule.pattern}"
    return f"{rule.action}: {rule.key} after {counted(rule.n or 0, 'approval')} in a row"


def which_listed(listed: int, count: int) -> str:
    """The heading of the rejections listed (the API lists the newest 100 at most)."""
    if listed == count:
        return f"the {count} it would approve that a person rejected, newest first"
    return f"the newest {listed} of the {count} it would approve that a person rejected"


def counted(number: int, noun: str) -> str:
    """`1 approval`, `3 approvals`."""
    return f"{number} {noun}{'' if number == 1 else 's'}"

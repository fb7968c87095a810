"""manage.py simulate_rule PATTERN [--action A] [--since 90d] [--json] [--fail-on-rejected]."""

import json

from django.core.management.base import BaseCommand, CommandError

from core.actors import Actor
from core.exceptions import DomainError
from core.timestamps import timestamp
from policies.models import RuleAction
from policies.replay import ACTIONS, AFTER_N, DEFAULT_SINCE, Replay, rule_simulate

CLI_ACTOR = Actor.system("cli")
FIGURES = (
    "considered",
    "matched",
    "wouldAutoApprove",
    "agreedWithHumans",
    "humanApproved",
    "humanRejected",
    "grantApproved",
)


class Command(BaseCommand):
    help = (
        "Replay a rule over the finished breakpoints of a window, with the rules that exist "
        "now (nothing is saved): how many it matches, would have auto-approved, and which of "
        "those a person rejected. --fail-on-rejected exits 1 when there is any (for CI)."
    )

    def add_arguments(self, parser):
        parser.add_argument("pattern", nargs="?", help=f"The rule's pattern (not for {AFTER_N}).")
        parser.add_argument("--action", choices=ACTIONS, default=RuleAction.AUTO_APPROVE)
        parser.add_argument("--key", help=f"{AFTER_N} only: the key it applies to.")
        parser.add_argument("--n", type=int, help=f"{AFTER_N} only: the approvals it needs.")
        parser.add_argument(
            "--since",
            default=DEFAULT_SINCE,
            help="An ISO 8601 time or a duration back from now: 90d, 12h, 30m, 2w (90d).",
        )
        parser.add_argument("--json", action="store_true", dest="as_json")
        parser.add_argument(
            "--fail-on-rejected",
            action="store_true",
            help="Exit 1 when the rule would have auto-approved a breakpoint a person rejected.",
        )

    def handle(self, *args, pattern, action, key, n, since, as_json, fail_on_rejected, **options):
        try:
            answer = rule_simulate(
                actor=CLI_ACTOR, action=action, pattern=pattern, key=key, n=n, since=since
            )
        except DomainError as exc:
            raise CommandError(exc.message) from exc
        body = answer.as_dict()
        body["since"] = timestamp(answer.since)
        if as_json:
            self.stdout.write(json.dumps(body, indent=2))
        else:
            self._print(answer, body)
        count = answer.rejected_but_would_approve_count
        if fail_on_rejected and count:
            raise CommandError(
                f"the rule would have auto-approved {count} breakpoint(s) a person rejected",
                returncode=1,
            )

    def _print(self, answer: Replay, body: dict) -> None:
        rule = " ".join(f"{name}={value}" for name, value in body["rule"].items())
        self.stdout.write(f"rule: {rule}")
        self.stdout.write(f"since: {body['since']}")
        for name in FIGURES:
            self.stdout.write(f"{name}: {body[name]}")
        listed = answer.rejected_but_would_approve
        self.stdout.write(
            f"rejectedButWouldApprove: {answer.rejected_but_would_approve_count}"
            + (f" (the newest {len(listed)} below)" if listed else "")
        )
        for item in listed:
            self.stdout.write(
                f"  {item['breakpointId']}  {item['key']}  by {item['respondedBy']} "
                f"at {item['decidedAt']}: {item['feedback']}"
            )

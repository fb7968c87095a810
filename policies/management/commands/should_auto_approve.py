"""manage.py should_auto_approve KEY [--tag T]... [--expert E]... [--after-n N] [--agent A]."""

import json

from django.core.management.base import BaseCommand, CommandError

from core.exceptions import DomainError
from core.limits import MAX_AGENT_ID_LENGTH, NO_AUTO_APPROVE_THRESHOLD
from policies.autoapproval import check_key, evaluate
from policies.validators import auto_approve_after_n_problem


class Command(BaseCommand):
    help = (
        "Evaluate the auto-approval rules for a breakpoint key: "
        "{recommended, reason, matchedRule, consecutiveApprovals}."
    )

    def add_arguments(self, parser):
        parser.add_argument("key")
        parser.add_argument("--tag", action="append", default=[], dest="tags")
        parser.add_argument("--expert", action="append", default=[], dest="experts")
        parser.add_argument(
            "--after-n",
            type=int,
            default=NO_AUTO_APPROVE_THRESHOLD,
            dest="after_n",
            help="The breakpoint's autoApproveAfterN (default -1: none).",
        )
        parser.add_argument(
            "--agent",
            dest="agent_id",
            help="Count the consecutive approvals of this agent's breakpoints only (as its next "
            "breakpoint would); default: across all agents.",
        )
        parser.add_argument("--json", action="store_true", dest="as_json")

    def handle(
        self,
        *args,
        key: str,
        tags,
        experts,
        after_n: int,
        agent_id: str | None,
        as_json: bool,
        **options,
    ):
        problem = auto_approve_after_n_problem(after_n)
        if problem:
            raise CommandError(f"--after-n: {problem}")
        if agent_id is not None and not 1 <= len(agent_id) <= MAX_AGENT_ID_LENGTH:
            raise CommandError(f"--agent must be 1 to {MAX_AGENT_ID_LENGTH} characters.")
        try:
            verdict = evaluate(
                key=check_key(key),
                tags=tags,
                experts=experts,
                auto_approve_after_n=after_n,
                agent_id=agent_id,
            )
        except DomainError as exc:
            raise CommandError(exc.message) from exc
        result = verdict.as_dict()
        if as_json:
            self.stdout.write(json.dumps(result, indent=2))
            return
        self.stdout.write(f"recommended: {'yes' if verdict.recommended else 'no'}")
        self.stdout.write(f"reason: {verdict.reason}")
        self.stdout.write(f"matchedRule: {verdict.matched_rule or '-'}")
        self.stdout.write(f"consecutiveApprovals: {verdict.consecutive_approvals}")

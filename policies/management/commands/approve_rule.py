"""manage.py approve_rule PATTERN [--action auto-approve|never-auto-approve] [--shadow] [--note N]."""

from django.core.management.base import BaseCommand, CommandError

from core.actors import Actor
from core.exceptions import DomainError
from policies.autoapproval import rule_create
from policies.models import RuleAction, RuleMode

CLI_ACTOR = Actor.system("cli")


class Command(BaseCommand):
    help = (
        "Add an auto-approval rule for breakpoint keys matching PATTERN, e.g. 'confirm.*' or "
        "\"*.review(tags contains 'design')\". Prints the rule id on the last line."
    )

    def add_arguments(self, parser):
        parser.add_argument("pattern")
        parser.add_argument("--action", choices=RuleAction.values, default=RuleAction.AUTO_APPROVE)
        parser.add_argument("--note", default="")
        parser.add_argument(
            "--shadow",
            action="store_true",
            help="Shadow mode: the rule decides nothing and records what it would have "
            "approved, until promote_rule makes it live.",
        )

    def handle(self, *args, pattern: str, action: str, note: str, shadow: bool, **options):
        mode = RuleMode.SHADOW if shadow else RuleMode.LIVE
        try:
            rule = rule_create(
                actor=CLI_ACTOR, pattern=pattern, action=action, note=note, mode=mode
            )
        except DomainError as exc:
            raise CommandError(exc.message) from exc
        suffix = f" ({rule.note})" if rule.note else ""
        kind = f"shadow {rule.action}" if shadow else rule.action
        self.stdout.write(f"Added {kind} rule for {rule.pattern}{suffix}")
        self.stdout.write(rule.pk)

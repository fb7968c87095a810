"""manage.py approve_rule PATTERN [--action auto-approve|never-auto-approve] [--note N]."""

from django.core.management.base import BaseCommand, CommandError

from core.actors import Actor
from core.exceptions import DomainError
from policies.autoapproval import rule_create
from policies.models import RuleAction

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

    def handle(self, *args, pattern: str, action: str, note: str, **options):
        try:
            rule = rule_create(actor=CLI_ACTOR, pattern=pattern, action=action, note=note)
        except DomainError as exc:
            raise CommandError(exc.message) from exc
        suffix = f" ({rule.note})" if rule.note else ""
        self.stdout.write(f"Added {rule.action} rule for {rule.pattern}{suffix}")
        self.stdout.write(rule.pk)

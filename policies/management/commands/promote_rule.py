"""manage.py promote_rule RULE_ID."""

from django.core.management.base import BaseCommand, CommandError

from core.actors import Actor
from core.exceptions import DomainError
from policies.shadow import rule_promote


class Command(BaseCommand):
    help = "Promote a shadow auto-approval rule to live: from the next breakpoint on, it decides."

    def add_arguments(self, parser):
        parser.add_argument("rule_id", metavar="RULE_ID")

    def handle(self, *args, rule_id: str, **options):
        try:
            rule = rule_promote(actor=Actor.system("cli"), rule_id=rule_id)
        except DomainError as exc:
            raise CommandError(exc.message) from exc
        self.stdout.write(f"Promoted rule {rule.pk}: it now decides.")

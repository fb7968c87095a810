"""manage.py remove_rule RULE_ID."""

from django.core.management.base import BaseCommand, CommandError

from core.actors import Actor
from core.exceptions import DomainError
from policies.autoapproval import rule_remove


class Command(BaseCommand):
    help = "Remove an auto-approval rule."

    def add_arguments(self, parser):
        parser.add_argument("rule_id", metavar="RULE_ID")

    def handle(self, *args, rule_id: str, **options):
        try:
            rule_remove(actor=Actor.system("cli"), rule_id=rule_id)
        except DomainError as exc:
            raise CommandError(exc.message) from exc
        self.stdout.write(f"Removed rule {rule_id}.")

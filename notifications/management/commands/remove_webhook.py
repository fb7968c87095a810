"""manage.py remove_webhook ID."""

from django.core.management.base import BaseCommand, CommandError

from core.exceptions import DomainError
from notifications.services import webhook_remove


class Command(BaseCommand):
    help = (
        "Remove a webhook subscription: it receives nothing more and is no longer listed; "
        "its deliveries and their audit events stay."
    )

    def add_arguments(self, parser):
        parser.add_argument("webhook_id", type=int, metavar="ID")

    def handle(self, *args, webhook_id: int, **options):
        try:
            webhook_remove(webhook_id=webhook_id)
        except DomainError as exc:
            raise CommandError(exc.message) from exc
        self.stdout.write(f"Removed webhook {webhook_id}.")

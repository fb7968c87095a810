"""manage.py add_webhook URL [--events created,released,...] [--secret S]."""

from django.core.management.base import BaseCommand, CommandError

from core.exceptions import DomainError
from notifications.services import webhook_add


class Command(BaseCommand):
    help = (
        "Subscribe URL to breakpoint events (created, released, expired, cancelled, feedback; "
        "omitted = all). Prints the id, and the generated secret when none was given."
    )

    def add_arguments(self, parser):
        parser.add_argument("url")
        parser.add_argument("--events", default="", help="Comma-separated event types.")
        parser.add_argument("--secret", default="", help="Signing secret (default: generated).")

    def handle(self, *args, url: str, events: str, secret: str, **options):
        try:
            webhook = webhook_add(url=url, event_types=events.split(","), secret=secret)
        except DomainError as exc:
            raise CommandError(exc.message) from exc
        subscribed = ", ".join(webhook.event_types) or "all events"
        self.stdout.write(f"Webhook {webhook.pk} → {webhook.url} ({subscribed})")
        if not secret:
            self.stdout.write(f"secret: {webhook.secret}")
        self.stdout.write(str(webhook.pk))

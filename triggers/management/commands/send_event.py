"""manage.py send_event SOURCE TYPE [--data JSON | --data @file] [--url URL] [--secret S]
[--id DELIVERY_ID] [--timeout SECONDS] [--json]: deprecated, `bpm events send`'s alias."""

import json

from bpm_client.config import URL_VARIABLE
from bpm_client.events.sending import (
    DEFAULT_TIMEOUT,
    SECRET_ENV,
    SendError,
    parse_data,
    resolve_url,
    send,
)
from django.core.management.base import BaseCommand, CommandError

from triggers.management.aliases import source_secret, warn_deprecated


class Command(BaseCommand):
    help = (
        "Deprecated: `bpm events send` (the bpm-client package). Sign (generic-hmac) and post "
        "an event of TYPE from SOURCE to the service's /api/events/SOURCE; prints the stored "
        "event's id and whether it was a duplicate."
    )

    def add_arguments(self, parser):
        parser.add_argument("source", help="The event source's name (a generic-hmac source).")
        parser.add_argument("event_type", metavar="TYPE", help="The event type, e.g. deploy.done.")
        parser.add_argument(
            "--data", default="", help="A JSON object, or @file (@- for stdin). Default {}."
        )
        parser.add_argument(
            "--url", help=f"The service (default ${URL_VARIABLE} or 127.0.0.1:8000)."
        )
        parser.add_argument(
            "--secret",
            help=f"The source's secret (default ${SECRET_ENV}, else the source's own secret "
            "when it is in this database).",
        )
        parser.add_argument(
            "--id", dest="delivery_id", help="The delivery id (default: a random UUID)."
        )
        parser.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT, help="Seconds.")
        parser.add_argument("--json", action="store_true", dest="as_json")

    def handle(self, *args, source: str, event_type: str, data: str, as_json: bool, **options):
        warn_deprecated(self, "send_event", "bpm events send")
        try:
            sent = send(
                url=resolve_url(options["url"]),
                source=source,
                event_type=event_type,
                data=parse_data(data),
                secret=source_secret(options["secret"], source),
                delivery_id=options["delivery_id"],
                timeout=options["timeout"],
            )
        except SendError as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(json.dumps(sent.as_dict()) if as_json else sent.line())

"""manage.py send_event SOURCE TYPE [--data JSON | --data @file] [--url URL] [--secret S]
[--id DELIVERY_ID] [--timeout SECONDS] [--json]."""

import json

from django.core.management.base import BaseCommand, CommandError

from triggers.sending import (
    DEFAULT_TIMEOUT,
    SECRET_ENV,
    URL_ENV,
    SendError,
    parse_data,
    resolve_secret,
    resolve_url,
    send,
)


class Command(BaseCommand):
    help = (
        "Sign (generic-hmac) and post an event of TYPE from SOURCE to the service's "
        "/api/events/SOURCE; prints the stored event's id and whether it was a duplicate."
    )

    def add_arguments(self, parser):
        parser.add_argument("source", help="The event source's name (a generic-hmac source).")
        parser.add_argument("event_type", metavar="TYPE", help="The event type, e.g. deploy.done.")
        parser.add_argument(
            "--data", default="", help="A JSON object, or @file (@- for stdin). Default {}."
        )
        parser.add_argument("--url", help=f"The service (default ${URL_ENV} or 127.0.0.1:8000).")
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
        if not 0 < options["timeout"] <= 300:
            raise CommandError("--timeout must be more than 0 and at most 300 seconds.")
        try:
            sent = send(
                url=resolve_url(options["url"]),
                source=source,
                event_type=event_type,
                data=parse_data(data),
                secret=resolve_secret(options["secret"], source),
                delivery_id=options["delivery_id"],
                timeout=options["timeout"],
            )
        except SendError as exc:
            raise CommandError(str(exc)) from None
        if as_json:
            self.stdout.write(json.dumps(sent.as_dict()))
        else:
            again = " (a duplicate: already received)" if sent.duplicate else ""
            self.stdout.write(f"Event {sent.event_id} accepted{again}.")

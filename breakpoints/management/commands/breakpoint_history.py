"""manage.py breakpoint_history [--limit N] [--key K] [--json]."""

import json

from django.core.management.base import BaseCommand, CommandError

from breakpoints.selectors import history
from core.exceptions import DomainError


class Command(BaseCommand):
    help = "Recent decisions (released breakpoints), newest first."

    def add_arguments(self, parser):
        parser.add_argument("--limit", type=int, default=20)
        parser.add_argument("--key", default=None)
        parser.add_argument("--json", action="store_true", dest="as_json")

    def handle(self, *args, limit: int, key: str | None, as_json: bool, **options):
        try:
            rows = history(limit=limit, key=key)
        except DomainError as exc:
            raise CommandError(exc.message) from exc
        if as_json:
            self.stdout.write(json.dumps(rows, indent=2))
            return
        if not rows:
            self.stdout.write("No decisions yet.")
        for row in rows:
            decision = "approved" if row["approved"] else "rejected"
            if row["autoApproved"]:
                decision = "auto-approved"
            responder = row["respondedBy"]
            if isinstance(responder, list):
                responder = ",".join(responder)
            self.stdout.write(
                f"{row['decidedAt']}\t{row['key']}\t{decision}\t{responder}\t{row['breakpointId']}"
            )

"""manage.py list_webhooks [--json]."""

import json
from typing import Any

from django.core.management.base import BaseCommand

from breakpoints.models import Webhook


class Command(BaseCommand):
    help = "List webhook subscriptions (secrets are not shown)."

    def add_arguments(self, parser):
        parser.add_argument("--json", action="store_true", dest="as_json")

    def handle(self, *args, as_json: bool, **options):
        rows: list[dict[str, Any]] = [
            {
                "id": w.pk,
                "url": w.url,
                "events": w.event_types or ["all"],
                "active": w.active,
                "createdAt": w.created_at.isoformat(),
            }
            for w in Webhook.objects.order_by("id")
        ]
        if as_json:
            self.stdout.write(json.dumps(rows, indent=2))
            return
        if not rows:
            self.stdout.write("No webhooks.")
        for row in rows:
            state = "active" if row["active"] else "inactive"
            self.stdout.write(f"{row['id']}\t{state}\t{','.join(row['events'])}\t{row['url']}")

"""manage.py list_webhooks [--json] [--all]."""

import json
from typing import Any

from django.core.management.base import BaseCommand

from core.timestamps import timestamp
from notifications.models import Webhook


class Command(BaseCommand):
    help = "List webhook subscriptions (secrets are not shown); --all includes removed ones."

    def add_arguments(self, parser):
        parser.add_argument("--json", action="store_true", dest="as_json")
        parser.add_argument(
            "--all", action="store_true", dest="with_removed", help="Include removed webhooks."
        )

    def handle(self, *args, as_json: bool, with_removed: bool, **options):
        webhooks = Webhook.objects.all() if with_removed else Webhook.objects.current()
        rows: list[dict[str, Any]] = [
            {
                "id": w.pk,
                "url": w.url,
                "events": w.event_types or ["all"],
                "active": w.active,
                "createdAt": timestamp(w.created_at),
                "removedAt": timestamp(w.removed_at),
            }
            for w in webhooks.order_by("id")
        ]
        if as_json:
            self.stdout.write(json.dumps(rows, indent=2))
            return
        if not rows:
            self.stdout.write("No webhooks.")
        for row in rows:
            state = "removed" if row["removedAt"] else "active" if row["active"] else "inactive"
            self.stdout.write(f"{row['id']}\t{state}\t{','.join(row['events'])}\t{row['url']}")

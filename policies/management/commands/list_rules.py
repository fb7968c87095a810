"""manage.py list_rules [--json]."""

import json

from django.core.management.base import BaseCommand

from core.timestamps import timestamp
from policies.autoapproval import rule_list_all
from policies.models import RuleMode


class Command(BaseCommand):
    help = "List auto-approval rules (live and shadow), oldest first."

    def add_arguments(self, parser):
        parser.add_argument("--json", action="store_true", dest="as_json")

    def handle(self, *args, as_json: bool, **options):
        rows = [
            {
                "id": rule.pk,
                "pattern": rule.pattern,
                "action": rule.action,
                "mode": rule.mode,
                "note": rule.note,
                "createdBy": rule.created_by,
                "createdAt": timestamp(rule.created_at),
            }
            for rule in rule_list_all()
        ]
        if as_json:
            self.stdout.write(json.dumps(rows, indent=2))
            return
        if not rows:
            self.stdout.write("No rules.")
        for row in rows:
            note = f"\t# {row['note']}" if row["note"] else ""
            action = f"shadow:{row['action']}" if row["mode"] == RuleMode.SHADOW else row["action"]
            self.stdout.write(f"{row['id']}\t{action}\t{row['pattern']}{note}")

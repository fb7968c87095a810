"""manage.py purge_breakpoints --older-than DAYS: retention, by hand."""

from django.core.management.base import BaseCommand, CommandError

from breakpoints.services import breakpoints_purge


class Command(BaseCommand):
    help = (
        "Delete finished (released, expired, cancelled) breakpoints, with their feedback and "
        "events, last changed more than DAYS days ago. Waiting ones are never purged."
    )

    def add_arguments(self, parser):
        parser.add_argument("--older-than", type=int, required=True, metavar="DAYS")

    def handle(self, *args, older_than: int, **options):
        if older_than < 0:
            raise CommandError("--older-than must be 0 or more days.")
        count = breakpoints_purge(older_than_days=older_than)
        self.stdout.write(f"Purged {count} breakpoint(s).")

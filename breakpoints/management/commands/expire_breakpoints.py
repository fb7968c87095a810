"""manage.py expire_breakpoints: run the TTL sweep once."""

from django.core.management.base import BaseCommand

from breakpoints.services import breakpoints_expire_due


class Command(BaseCommand):
    help = "Expire every waiting breakpoint whose expiresAt has passed (the TTL sweep, once)."

    def handle(self, *args, **options):
        count = breakpoints_expire_due()
        self.stdout.write(f"Expired {count} breakpoint(s).")

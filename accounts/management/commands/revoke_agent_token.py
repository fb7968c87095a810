"""manage.py revoke_agent_token TOKEN_PREFIX_OR_ID: later requests with it get 401."""

from django.core.management.base import BaseCommand, CommandError

from accounts.tokens import token_revoke
from core.exceptions import DomainError


class Command(BaseCommand):
    help = "Revoke an API token by its id, its printed prefix (bpma_xxxxxxx) or the token itself."

    def add_arguments(self, parser):
        parser.add_argument("token", metavar="TOKEN_PREFIX_OR_ID")

    def handle(self, *args, token: str, **options):
        try:
            revoked = token_revoke(prefix_or_id=token)
        except DomainError as exc:
            raise CommandError(exc.message) from exc
        self.stdout.write(f"Revoked token {revoked.pk} ({revoked.prefix}…).")

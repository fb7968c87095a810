"""manage.py create_agent_token AGENT_ID [--name NAME] [--owner PERSON]: prints a new token
once, on the last line."""

from django.core.management.base import BaseCommand, CommandError

from accounts.tokens import token_create_for_agent
from core.exceptions import DomainError


class Command(BaseCommand):
    help = (
        "Create an API token bound to an agentId. The token is printed once; only a hash is kept."
    )

    def add_arguments(self, parser):
        parser.add_argument("agent_id")
        parser.add_argument("--name", default="", help="A label for admins.")
        parser.add_argument(
            "--owner",
            default=None,
            help="The person (username or email) the agent acts for: its breakpoints' "
            "requestedBy unless they name one.",
        )

    def handle(self, *args, agent_id: str, name: str, owner: str | None, **options):
        try:
            token, raw = token_create_for_agent(agent_id=agent_id, name=name, owner=owner)
        except DomainError as exc:
            raise CommandError(exc.message) from exc
        self.stderr.write(
            f"Agent token {token.pk} for agent {token.agent_id!r} (prefix {token.prefix}). "
            "Store it now: it is not shown again."
        )
        self.stdout.write(raw)

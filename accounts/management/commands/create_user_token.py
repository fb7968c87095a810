"""manage.py create_user_token USERNAME: prints a personal API token, last line."""

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from accounts.tokens import token_create_for_user
from core.actors import is_reviewer


class Command(BaseCommand):
    help = "Create a personal API token for a reviewer or admin. Printed once."

    def add_arguments(self, parser):
        parser.add_argument("username")
        parser.add_argument("--name", default="", help="A label for admins.")

    def handle(self, *args, username: str, name: str, **options):
        user = get_user_model().objects.filter(username=username).first()
        if user is None:
            raise CommandError(f"No user named {username!r}.")
        if not user.is_active:
            raise CommandError(f"User {username!r} is inactive.")
        if not is_reviewer(user):
            raise CommandError(f"User {username!r} is neither a reviewer nor an admin.")
        token, raw = token_create_for_user(user=user, name=name)
        self.stderr.write(f"Personal token {token.pk} for {username!r} (prefix {token.prefix}).")
        self.stdout.write(raw)

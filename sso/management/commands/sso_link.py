"""manage.py sso_link USERNAME SUBJECT: an existing account signs in through the identity
provider from now on (matched on SUBJECT, the provider's `sub`), keeping its history."""

from django.core.management.base import BaseCommand, CommandError

from core.exceptions import DomainError
from sso.services import identity_link


class Command(BaseCommand):
    help = (
        "Link an existing account (e.g. one create_reviewer made) to the identity provider's "
        "subject SUBJECT (its `sub` claim), so that person's single sign-on uses this account "
        "instead of making a new one. The provider's groups set its roles at each sign-in."
    )

    def add_arguments(self, parser):
        parser.add_argument("username")
        parser.add_argument("subject", help="The person's `sub` claim at the provider.")

    def handle(self, *args, username: str, subject: str, **options):
        try:
            identity = identity_link(username=username, subject=subject)
        except DomainError as exc:
            raise CommandError(exc.message) from exc
        self.stdout.write(
            f"{identity.user.get_username()!r} signs in as {identity.subject!r} at {identity.issuer}."
        )

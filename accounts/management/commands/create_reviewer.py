"""manage.py create_reviewer USERNAME [--email E] [--admin] [--group G]... [--update]: a console
and API account (with --update: created, or an existing one brought up to date)."""

import getpass
import sys

from django.contrib.auth import get_user_model
from django.contrib.auth.password_validation import validate_password
from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from accounts.people import reviewer_create
from core.actors import is_admin
from core.exceptions import DomainError


class Command(BaseCommand):
    help = (
        "Create a reviewer (or, with --admin, an admin). The password is read from stdin "
        "when stdin is not a terminal, else prompted for."
    )

    def add_arguments(self, parser):
        parser.add_argument("username")
        parser.add_argument("--email", default="")
        parser.add_argument("--admin", action="store_true", help="Make an admin, not a reviewer.")
        parser.add_argument(
            "--group",
            action="append",
            default=[],
            metavar="G",
            help="Also join group G (created if missing), e.g. an expert group such as "
            "tech-lead that payload.expert routes to. Repeatable.",
        )
        parser.add_argument(
            "--update",
            action="store_true",
            help="If USERNAME exists, update it instead of refusing: set the password (and "
            "the email, when given), add the groups, make an admin with --admin (an admin "
            "stays one). Without it an existing name is refused.",
        )

    def handle(
        self,
        *args,
        username: str,
        email: str,
        admin: bool,
        group: list[str],
        update: bool,
        **options,
    ):
        existed = get_user_model().objects.filter(username=username.strip()).exists()
        password = self._read_password()
        try:
            validate_password(password)
        except ValidationError as exc:
            raise CommandError("Password refused: " + " ".join(exc.messages)) from exc
        try:
            user = reviewer_create(
                username=username,
                email=email,
                password=password,
                admin=admin,
                groups=group,
                update=update,
            )
        except DomainError as exc:
            raise CommandError(exc.message) from exc
        role = "admin" if is_admin(user) else "reviewer"
        joined = f" in {', '.join(group)}" if group else ""
        done = "Updated" if existed else "Created"
        self.stdout.write(f"{done} {role} {user.get_username()!r}{joined}.")

    def _read_password(self) -> str:
        if sys.stdin is None or not sys.stdin.isatty():
            password = (sys.stdin.readline() if sys.stdin else "").rstrip("\r\n")
            if not password:
                raise CommandError("No password on stdin.")
            return password
        password = getpass.getpass("Password: ")
        if password != getpass.getpass("Password (again): "):
            raise CommandError("Passwords do not match.")
        return password

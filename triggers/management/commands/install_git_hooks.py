"""manage.py install_git_hooks REPO [--source S] [--url URL] [--secret-env NAME] [--force]:
deprecated, `bpm events hooks install`'s alias."""

from pathlib import Path

from bpm_client.config import URL_VARIABLE
from bpm_client.events.githooks import HOOKS, install, report
from bpm_client.events.sending import DEFAULT_TIMEOUT, SECRET_ENV, SendError, resolve_url
from django.core.management.base import BaseCommand, CommandError

from triggers.management.aliases import warn_deprecated


class Command(BaseCommand):
    help = (
        "Deprecated: `bpm events hooks install` (the bpm-client package). "
        f"Write {', '.join(HOOKS)} hooks into REPO that send git.<hook> events "
        "({ref, sha, branch, repo}) with `bpm events send`, in the background: they never "
        "block nor fail git. The secret is read from an environment variable when a hook runs."
    )

    def add_arguments(self, parser):
        parser.add_argument("repo", help="The git repository (its work tree).")
        parser.add_argument("--source", default="git", help="The event source (default git).")
        parser.add_argument(
            "--url",
            help=f"The service, written into the hooks (default: ${URL_VARIABLE} at run time).",
        )
        parser.add_argument(
            "--secret-env",
            default=SECRET_ENV,
            dest="secret_env",
            help=f"The variable holding the source's secret when a hook runs (default {SECRET_ENV}).",
        )
        parser.add_argument(
            "--timeout", type=float, default=DEFAULT_TIMEOUT, help="Each send's HTTP timeout."
        )
        parser.add_argument(
            "--force", action="store_true", help="Replace hooks this did not write (kept aside)."
        )

    def handle(self, *args, repo: str, source: str, url: str | None, **options):
        warn_deprecated(self, "install_git_hooks", "bpm events hooks install")
        try:
            url = resolve_url(url) if url else None
            installed = install(
                Path(repo).resolve(),
                source=source,
                url=url,
                secret_env=options["secret_env"],
                force=options["force"],
                timeout=options["timeout"],
            )
        except SendError as exc:
            raise CommandError(str(exc)) from None
        for line in report(installed, source=source, url=url, secret_env=options["secret_env"]):
            self.stdout.write(line)

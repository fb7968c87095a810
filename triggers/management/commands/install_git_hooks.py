"""manage.py install_git_hooks REPO [--source S] [--url URL] [--secret-env NAME] [--force]."""

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from triggers.management.githooks import HOOKS, HookError, install
from triggers.sending import DEFAULT_TIMEOUT, SECRET_ENV, URL_ENV, SendError, resolve_url


class Command(BaseCommand):
    help = (
        f"Write {', '.join(HOOKS)} hooks into REPO that send git.<hook> events "
        "({ref, sha, branch, repo}) with send_event, in the background: they never block "
        "nor fail git. The secret is read from an environment variable when a hook runs."
    )

    def add_arguments(self, parser):
        parser.add_argument("repo", help="The git repository (its work tree).")
        parser.add_argument("--source", default="git", help="The event source (default git).")
        parser.add_argument(
            "--url", help=f"The service, written into the hooks (default: ${URL_ENV} at run time)."
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
        if not 0 < options["timeout"] <= 60:
            raise CommandError("--timeout must be more than 0 and at most 60 seconds.")
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
        except (HookError, SendError) as exc:
            raise CommandError(str(exc)) from None
        for hook in installed:
            kept = f" (the previous hook kept as {hook.backup.name})" if hook.backup else ""
            self.stdout.write(f"Installed {hook.path}{kept}")
        target = url or f"${URL_ENV} or the default URL"
        self.stdout.write(
            f"Each sends git.<hook> events from source {source!r} to {target}; "
            f"set ${options['secret_env']} to the source's secret where git runs."
        )

"""manage.py watch_path PATH --source S [--url URL] [--debounce SECONDS] [--once]:
deprecated, `bpm events watch`'s alias."""

from bpm_client.config import URL_VARIABLE
from bpm_client.events.sending import SECRET_ENV, SendError, resolve_url
from bpm_client.events.watching import (
    DEFAULT_DEBOUNCE,
    Watching,
    check_watching,
    watch_and_send,
)
from django.core.management.base import BaseCommand, CommandError

from triggers.management.aliases import source_secret, warn_deprecated


class Command(BaseCommand):
    help = (
        "Deprecated: `bpm events watch` (the bpm-client package, with its watch extra). "
        "Watch PATH (a folder, recursively, or one file) and send file.created, "
        "file.modified and file.deleted events ({path, sha256, size}) from SOURCE, "
        "debounced: several writes within the window are one event. SIGINT/SIGTERM stop it."
    )

    def add_arguments(self, parser):
        parser.add_argument("path")
        parser.add_argument("--source", required=True, help="The event source's name.")
        parser.add_argument(
            "--url", help=f"The service (default ${URL_VARIABLE} or 127.0.0.1:8000)."
        )
        parser.add_argument(
            "--debounce",
            type=float,
            default=DEFAULT_DEBOUNCE,
            help=f"Seconds without a change before a file's event is sent ({DEFAULT_DEBOUNCE}).",
        )
        parser.add_argument(
            "--once", action="store_true", help="Exit after the first event is sent (tests)."
        )

    def handle(self, *args, path: str, source: str, debounce: float, once: bool, **options):
        warn_deprecated(self, "watch_path", "bpm events watch")
        try:
            target = check_watching(path, debounce)
            url = resolve_url(options["url"])
        except SendError as exc:
            raise CommandError(str(exc)) from None
        try:
            secret = source_secret(None, source)
        except SendError as exc:
            raise CommandError(f"{exc} (watch_path reads ${SECRET_ENV})") from None
        watching = Watching(target, url, source, secret, debounce=debounce, once=once)
        try:
            watch_and_send(watching, say=self._say, complain=self._complain)
        except SendError as exc:  # watchdog missing (WatchUnavailable), a --once send
            raise CommandError(str(exc)) from None

    def _say(self, line: str) -> None:
        self.stdout.write(line)
        self.stdout.flush()

    def _complain(self, line: str) -> None:
        self.stderr.write(line)
        self.stderr.flush()

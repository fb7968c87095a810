"""manage.py watch_path PATH --source S [--url URL] [--debounce SECONDS] [--once]."""

import signal
import threading
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from triggers.management.watching import watch
from triggers.sending import SECRET_ENV, URL_ENV, SendError, resolve_secret, resolve_url, send

DEFAULT_DEBOUNCE = 0.5


class Command(BaseCommand):
    help = (
        "Watch PATH (a folder, recursively, or one file) and send file.created, "
        "file.modified and file.deleted events ({path, sha256, size}) from SOURCE, "
        "debounced: several writes within the window are one event. SIGINT/SIGTERM stop it."
    )

    def add_arguments(self, parser):
        parser.add_argument("path")
        parser.add_argument("--source", required=True, help="The event source's name.")
        parser.add_argument("--url", help=f"The service (default ${URL_ENV} or 127.0.0.1:8000).")
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
        if not 0 < debounce <= 60:
            raise CommandError("--debounce must be more than 0 and at most 60 seconds.")
        target = Path(path).expanduser()
        if not target.exists():
            raise CommandError(f"{path} does not exist.")
        try:
            url = resolve_url(options["url"])
            secret = resolve_secret(None, source)
        except SendError as exc:
            raise CommandError(f"{exc} (watch_path reads ${SECRET_ENV})") from None
        self._url, self._source, self._secret, self._once = url, source, secret, once
        stop = threading.Event()
        previous = {
            sig: signal.signal(sig, lambda *_: stop.set())
            for sig in (signal.SIGINT, signal.SIGTERM)
        }
        try:
            unsent = watch(
                target,
                window=debounce,
                on_change=self._send,
                stop=stop,
                once=once,
                on_ready=lambda: self._say(
                    f"Watching {target.resolve()} (source {source!r}, debounce {debounce:g} s) "
                    f"-> {url}"
                ),
            )
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
        note = f"; {unsent} change(s) still in their window were not sent" if unsent else ""
        self._say(f"Stopped{note}.")

    def _send(self, event_type: str, data: dict[str, Any]) -> bool:
        try:
            sent = send(
                url=self._url,
                source=self._source,
                event_type=event_type,
                data=data,
                secret=self._secret,
            )
        except SendError as exc:
            if self._once:
                raise CommandError(f"{event_type} {data['path']}: {exc}") from None
            self.stderr.write(f"{event_type} {data['path']} not sent: {exc}")
            self.stderr.flush()
            return False
        duplicate = " (duplicate)" if sent.duplicate else ""
        self._say(f"{event_type} {data['path']} -> {sent.event_id}{duplicate}")
        return True

    def _say(self, line: str) -> None:
        self.stdout.write(line)
        self.stdout.flush()

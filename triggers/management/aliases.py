"""What the deprecated senders `send_event`, `install_git_hooks` and `watch_path` add to
the agent client's `bpm events send|hooks install|watch` (bpm_client.events), whose thin
aliases they are for one release: the deprecation note, and the secret read from this
database when none is given (the client runs beside a repository, with no database)."""

import os

from bpm_client.events.sending import SECRET_ENV, missing_secret
from django.core.management.base import BaseCommand
from django.db import DatabaseError, connection

from triggers.models import EventSource


def warn_deprecated(command: BaseCommand, name: str, replacement: str) -> None:
    """One line on stderr: what replaces the command, and that it goes in the next release."""
    command.stderr.write(
        f"Deprecated: manage.py {name} is now `{replacement}` (the bpm-client package); "
        "this alias will be removed in the next release.",
        style_func=command.style.WARNING,
    )
    command.stderr.flush()


def source_secret(given: str | None, source: str) -> str:
    """--secret, else $BPM_EVENT_SECRET, else the source's own secret in this database."""
    chosen = given or os.environ.get(SECRET_ENV)
    if chosen:
        return chosen
    try:
        stored = EventSource.objects.filter(name=source).values_list("secret", flat=True).first()
    except DatabaseError:
        stored = None  # no database here: the secret has to come from outside
    finally:
        if not connection.in_atomic_block:
            # A sender (a watcher) then waits on HTTP: it holds no connection.
            connection.close()
    if not stored:
        raise missing_secret(source)
    return stored

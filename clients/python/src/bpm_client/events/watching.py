"""File changes as events: watchdog's signals, debounced into one change per file, sent.

Every signal for a path (created, modified, deleted, moved) restarts that path's window;
once `window` seconds pass without one, the file's state decides the change:
file.created (it did not exist before the window), file.modified, or file.deleted, with
{path, sha256, size} (no sha256 nor size once deleted). A file created and deleted within
one window is no change. Directories and editors' temporary files are ignored.

watchdog (the `watch` extra) is imported only when a watch starts (`observing`): without
it, `watch` raises WatchUnavailable saying how to install it.
"""

from __future__ import annotations

import hashlib
import os
import signal
import stat
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..extras import install_command
from .sending import SendError, send

TEMPORARY_SUFFIXES = (".swp", ".swo", ".swx", ".tmp", ".part", ".crdownload")
CHUNK = 1 << 20
DEFAULT_DEBOUNCE = 0.5
MAX_DEBOUNCE = 60.0

Change = tuple[str, dict[str, Any]]  # (event type, data)


class WatchUnavailable(SendError):
    """watchdog is not installed."""


def watch_missing() -> str:
    """What a watch says when the `watch` extra (watchdog) is not installed: how to install
    it where this runs."""
    return (
        "watching files needs watchdog, an optional extra: "
        f"{install_command('watch')} (in the project's folder)"
    )


def is_temporary(path: str) -> bool:
    """Editors' and tools' scratch files: backup~, .x.swp, .#lock, vim's 4913, .git/*."""
    name = os.path.basename(path)
    return (
        not name
        or name.endswith("~")
        or name.endswith(TEMPORARY_SUFFIXES)
        or name.startswith(".#")
        or name == "4913"
        or ".git" in Path(path).parts
    )


@dataclass
class _Window:
    existed: bool  # whether the file existed before the window's first signal
    due: float


class Debouncer:
    """Signals (from watchdog's thread) in; paths whose window has passed out."""

    def __init__(self, window: float, clock: Callable[[], float] = time.monotonic):
        self.window = window
        self.clock = clock
        self._windows: dict[str, _Window] = {}
        self._lock = threading.Lock()

    def signal(self, path: str, *, existed: bool) -> None:
        """A signal for path; `existed`: whether the file was there before it."""
        with self._lock:
            window = self._windows.setdefault(path, _Window(existed=existed, due=0.0))
            window.due = self.clock() + self.window

    def due(self) -> list[tuple[str, bool]]:
        """(path, existed before) of every window that has passed, oldest first."""
        now = self.clock()
        with self._lock:
            ready = sorted(
                (window.due, path) for path, window in self._windows.items() if window.due <= now
            )
            return [(path, self._windows.pop(path).existed) for _, path in ready]

    def __len__(self) -> int:
        with self._lock:
            return len(self._windows)


def change_of(path: str, *, existed: bool) -> Change | None:
    """The change a window ends with, from the file's state now (None: no change)."""
    try:
        digest, size = _hash_regular_file(path)
    except FileNotFoundError:
        return ("file.deleted", {"path": path}) if existed else None
    except OSError:
        return None  # not a regular file we may read (a directory, fifo, socket...)
    kind = "file.modified" if existed else "file.created"
    return kind, {"path": path, "sha256": digest, "size": size}


def _hash_regular_file(path: str) -> tuple[str, int]:
    """sha256 and size of what was read (never blocking on a fifo: O_NONBLOCK)."""
    descriptor = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    with os.fdopen(descriptor, "rb") as file:
        if not stat.S_ISREG(os.fstat(file.fileno()).st_mode):
            raise OSError(f"{path} is not a regular file")
        digest, size = hashlib.sha256(), 0
        while chunk := file.read(CHUNK):
            digest.update(chunk)
            size += len(chunk)
    return digest.hexdigest(), size


def watch(
    target: Path,
    *,
    window: float,
    on_change: Callable[[str, dict[str, Any]], bool],
    stop: threading.Event,
    once: bool = False,
    tick: float = 0.05,
    on_ready: Callable[[], None] | None = None,
) -> int:
    """Watch a folder (recursively) or one file until `stop` is set (or, once, until
    on_change returned True for one change); returns the count of changes not yet sent."""
    try:
        # Here, not at the top: watchdog is the optional `watch` extra.
        from .observing import observe
    except ImportError as error:
        if (error.name or "").partition(".")[0] == "watchdog":
            raise WatchUnavailable(watch_missing()) from None
        raise
    target = target.resolve()
    single = None if target.is_dir() else str(target)
    debouncer = Debouncer(window)
    observer = observe(
        str(target if single is None else target.parent),
        debouncer=debouncer,
        accept=lambda path: (single is None or path == single) and not is_temporary(path),
        recursive=single is None,
    )
    try:
        if on_ready is not None:
            on_ready()
        while not stop.wait(tick):
            for path, existed in debouncer.due():
                change = change_of(path, existed=existed)
                if change is not None and on_change(*change) and once:
                    return len(debouncer)
        return len(debouncer)
    finally:
        observer.stop()
        observer.join(timeout=5)


@dataclass(frozen=True)
class Watching:
    """What `bpm events watch` (and its deprecated alias) watches and where it sends."""

    target: Path
    url: str
    source: str
    secret: str
    debounce: float = DEFAULT_DEBOUNCE
    once: bool = False


def check_watching(path: str, debounce: float) -> Path:
    """The path to watch, if it exists and the debounce window is sensible."""
    if not 0 < debounce <= MAX_DEBOUNCE:
        raise SendError(f"--debounce must be more than 0 and at most {MAX_DEBOUNCE:g} seconds.")
    target = Path(path).expanduser()
    if not target.exists():
        raise SendError(f"{path} does not exist.")
    return target


def watch_and_send(
    watching: Watching, *, say: Callable[[str], None], complain: Callable[[str], None]
) -> None:
    """Send each change until SIGINT or SIGTERM (or, once, the first one sent). `say` gets
    the progress lines, `complain` a send that failed (with --once, a SendError instead)."""

    def on_change(event_type: str, data: dict[str, Any]) -> bool:
        try:
            sent = send(
                url=watching.url,
                source=watching.source,
                event_type=event_type,
                data=data,
                secret=watching.secret,
            )
        except SendError as exc:
            if watching.once:
                raise SendError(f"{event_type} {data['path']}: {exc}") from None
            complain(f"{event_type} {data['path']} not sent: {exc}")
            return False
        duplicate = " (duplicate)" if sent.duplicate else ""
        say(f"{event_type} {data['path']} -> {sent.event_id}{duplicate}")
        return True

    target = watching.target.resolve()
    ready = (
        f"Watching {target} (source {watching.source!r}, debounce {watching.debounce:g} s) "
        f"-> {watching.url}"
    )
    stop = threading.Event()
    previous = {
        sig: signal.signal(sig, lambda *_: stop.set()) for sig in (signal.SIGINT, signal.SIGTERM)
    }
    try:
        unsent = watch(
            target,
            window=watching.debounce,
            on_change=on_change,
            stop=stop,
            once=watching.once,
            on_ready=lambda: say(ready),
        )
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    note = f"; {unsent} change(s) still in their window were not sent" if unsent else ""
    say(f"Stopped{note}.")

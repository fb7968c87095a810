"""File changes as events: watchdog's signals, debounced into one change per file.

Every signal for a path (created, modified, deleted, moved) restarts that path's window;
once `window` seconds pass without one, the file's state decides the change:
file.created (it did not exist before the window), file.modified, or file.deleted, with
{path, sha256, size} (no sha256 nor size once deleted). A file created and deleted within
one window is no change. Directories and editors' temporary files are ignored.
"""

import hashlib
import os
import stat
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from watchdog.events import (
    EVENT_TYPE_CREATED,
    EVENT_TYPE_DELETED,
    EVENT_TYPE_MODIFIED,
    EVENT_TYPE_MOVED,
    FileSystemEvent,
    FileSystemEventHandler,
)
from watchdog.observers import Observer

TEMPORARY_SUFFIXES = (".swp", ".swo", ".swx", ".tmp", ".part", ".crdownload")
CHUNK = 1 << 20

Change = tuple[str, dict[str, Any]]  # (event type, data)


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


class _Handler(FileSystemEventHandler):
    """watchdog's events (files only, not temporary ones) as debouncer signals."""

    def __init__(self, debouncer: Debouncer, accept: Callable[[str], bool]):
        self.debouncer = debouncer
        self.accept = accept

    def _signal(self, path: str | bytes, *, existed: bool) -> None:
        text = os.fsdecode(path)
        if text and self.accept(text) and not is_temporary(text):
            self.debouncer.signal(text, existed=existed)

    def on_any_event(self, event: FileSystemEvent) -> None:
        if event.is_directory:
            return
        if event.event_type == EVENT_TYPE_CREATED:
            self._signal(event.src_path, existed=False)
        elif event.event_type in (EVENT_TYPE_MODIFIED, EVENT_TYPE_DELETED):
            self._signal(event.src_path, existed=True)
        elif event.event_type == EVENT_TYPE_MOVED:
            self._signal(event.src_path, existed=True)  # gone from there
            # Moved in: most often an editor's atomic save over the file (a modification).
            self._signal(event.dest_path, existed=True)


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
    target = target.resolve()
    folder = target if target.is_dir() else target.parent
    debouncer = Debouncer(window)
    single = None if target.is_dir() else str(target)
    handler = _Handler(debouncer, accept=lambda path: single is None or path == single)
    observer = Observer()
    observer.schedule(handler, str(folder), recursive=single is None)
    observer.start()
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

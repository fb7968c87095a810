"""watchdog's file-system signals as the debouncer's (`watching`): the one module that
imports watchdog, the `watch` extra, so that everything else works without it."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TYPE_CHECKING

from watchdog.events import (
    EVENT_TYPE_CREATED,
    EVENT_TYPE_DELETED,
    EVENT_TYPE_MODIFIED,
    EVENT_TYPE_MOVED,
    FileSystemEvent,
    FileSystemEventHandler,
)
from watchdog.observers import Observer
from watchdog.observers.api import BaseObserver

if TYPE_CHECKING:
    from .watching import Debouncer


class _Handler(FileSystemEventHandler):
    """watchdog's events (files only, not temporary ones) as debouncer signals."""

    def __init__(self, debouncer: Debouncer, accept: Callable[[str], bool]):
        self.debouncer = debouncer
        self.accept = accept

    def _signal(self, path: str | bytes, *, existed: bool) -> None:
        text = os.fsdecode(path)
        if text and self.accept(text):
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


def observe(
    folder: str, *, debouncer: Debouncer, accept: Callable[[str], bool], recursive: bool
) -> BaseObserver:
    """A started observer of folder signalling the debouncer for each path accept takes."""
    observer = Observer()
    observer.schedule(_Handler(debouncer, accept), folder, recursive=recursive)
    observer.start()
    return observer

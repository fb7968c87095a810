"""A long-running process's startup heap, kept out of the garbage collector's way."""

import gc

from django.urls import get_resolver


def startup_heap_freeze() -> None:
    """Load the URLconf (and the views it imports), then freeze everything held so far.

    What a process holds once started (Django, the apps, the URLconf: ~150,000 objects)
    lives as long as the process: frozen out of the collector, it is not walked again by
    every full collection (61 ms each, stalling a worker's requests under load; list p95
    with 8 clients 271 -> 131 ms in benchmarks/http_bench.py's lists section).
    """
    get_resolver().url_patterns  # noqa: B018 - loaded now, to be frozen with the rest
    gc.collect()
    gc.freeze()

"""Run a coroutine to completion from a sync test, whatever loop the thread already has.

Playwright's sync API (the e2e tests) leaves an event loop running in the main thread for
the rest of the session, where asyncio.run() refuses to start; a thread of its own has none.
"""

import asyncio
from collections.abc import Coroutine
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

T = TypeVar("T")


def run_async(coroutine: Coroutine[Any, Any, T]) -> T:
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, coroutine).result()

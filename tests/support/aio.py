"""Run a coroutine to completion from a sync test, whatever loop the thread already has.

Playwright's sync API (the e2e tests) leaves an event loop running in the main thread for
the rest of the session, where asyncio.run() refuses to start; a thread of its own has none.
"""

import asyncio
from collections.abc import Awaitable, Callable, Coroutine
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import httpx

T = TypeVar("T")


def run_async(coroutine: Coroutine[Any, Any, T]) -> T:
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, coroutine).result()


def run_asgi(scenario: Callable[[httpx.AsyncClient], Awaitable[T]], **transport: Any) -> T:
    """scenario(client) against the project's ASGI application (config.asgi), in process,
    on a fresh loop; that loop's waiting hub is stopped at the end."""
    from breakpoints.waiting.hub import stop_hub
    from config.asgi import application

    async def main() -> T:
        asgi = httpx.ASGITransport(app=application, **transport)
        try:
            async with httpx.AsyncClient(transport=asgi, base_url="http://testserver") as client:
                return await scenario(client)
        finally:
            await stop_hub()

    return run_async(main())


async def until(predicate: Callable[[], bool], seconds: float = 10) -> None:
    """Wait on the loop until predicate() holds (AssertionError after `seconds`)."""
    for _ in range(int(seconds / 0.01)):
        if predicate():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("condition not reached")

"""A tiny ASGI app for the web-worker tests: answers with the pid of the worker serving it.

GET /slow?seconds=S sleeps S seconds first (a request in flight during a shutdown).
"""

import asyncio
import os
from urllib.parse import parse_qs


async def app(scope, receive, send):
    if scope["type"] == "lifespan":
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return
    if scope["path"] == "/slow":
        seconds = float(parse_qs(scope["query_string"].decode()).get("seconds", ["1"])[0])
        await asyncio.sleep(seconds)
    body = str(os.getpid()).encode()
    await send(
        {
            "type": "http.response.start",
            "status": 200,
            "headers": [(b"content-type", b"text/plain"), (b"content-length", b"%d" % len(body))],
        }
    )
    await send({"type": "http.response.body", "body": body})

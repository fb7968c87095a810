"""A small asyncio HTTP/1.1 client and load generators for the HTTP benchmarks (loopback only).

Raw asyncio streams with keep-alive (uvloop when installed): a request costs the client a
few tens of microseconds, far less than httpx, so one client process can drive a
server on the same machine to saturation. Two load shapes:

- closed loop: N connections, each sends its next request as soon as the previous one
  is answered; the throughput at saturation;
- open loop: requests are due at a constant arrival rate whatever the server does, and
  each latency runs from the moment the request was due (not from when a connection
  became free), so queueing behind a slow server is counted (no coordinated omission).

`run_load(spec)` runs one of them in the calling process and returns plain data, so the
benchmark can run it in one or more spawned processes and add the results up. Every
loop is bounded in time and in count.
"""

import asyncio
import contextlib
import random
import time
from collections import Counter, deque
from dataclasses import dataclass, field

LOOPBACK = ("127.0.0.1", "::1", "localhost")
HEAD_LIMIT = 64 * 1024


class HTTPError(Exception):
    """A malformed or cut response."""


@dataclass
class Response:
    status: int
    body: bytes
    keep_alive: bool


def build_request(
    method: str,
    path: str,
    *,
    port: int,
    token: str | None = None,
    body: bytes | None = None,
    headers: dict[str, str] | None = None,
) -> bytes:
    lines = [f"{method} {path} HTTP/1.1", f"Host: 127.0.0.1:{port}"]
    if token:
        lines.append(f"Authorization: Bearer {token}")
    for name, value in (headers or {}).items():
        lines.append(f"{name}: {value}")
    if body is not None:
        lines.append("Content-Type: application/json")
        lines.append(f"Content-Length: {len(body)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + (body or b"")


class Connection:
    """One keep-alive connection; reopened transparently when the server closed it."""

    def __init__(self, port: int, host: str = "127.0.0.1"):
        if host not in LOOPBACK:
            raise ValueError(f"benchmarks only talk to loopback, not {host!r}")
        self.host, self.port = host, port
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None
        self.connects = 0

    async def open(self) -> None:
        self.reader, self.writer = await asyncio.open_connection(
            self.host, self.port, limit=HEAD_LIMIT
        )
        self.connects += 1

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
        self.reader = self.writer = None

    async def request(self, raw: bytes) -> Response:
        """Send one request and read its response.

        A keep-alive connection the server closed while idle fails before any byte of
        the response arrives: then it is reopened and the request sent once more.
        """
        fresh = self.writer is None
        if fresh:
            await self.open()
        try:
            return await self._exchange(raw)
        except (ConnectionError, asyncio.IncompleteReadError) as error:
            self.close()
            if fresh or (isinstance(error, asyncio.IncompleteReadError) and error.partial):
                raise
            await self.open()
            return await self._exchange(raw)

    async def _exchange(self, raw: bytes) -> Response:
        assert self.reader is not None and self.writer is not None
        self.writer.write(raw)
        response = await read_response(self.reader)
        if not response.keep_alive:
            self.close()
        return response


async def read_response(reader: asyncio.StreamReader) -> Response:
    head = await reader.readuntil(b"\r\n\r\n")
    status_line, _, header_block = head.partition(b"\r\n")
    parts = status_line.split(b" ", 2)
    if len(parts) < 2 or not parts[0].startswith(b"HTTP/1."):
        raise HTTPError(f"bad status line {status_line[:80]!r}")
    status = int(parts[1])
    length, chunked = None, False
    keep_alive = parts[0] == b"HTTP/1.1"
    for line in header_block.split(b"\r\n"):
        name, _, value = line.partition(b":")
        name = name.strip().lower()
        if name == b"content-length":
            length = int(value)
        elif name == b"transfer-encoding":
            chunked = b"chunked" in value.lower()
        elif name == b"connection":
            option = value.strip().lower()
            keep_alive = option == b"keep-alive" or (keep_alive and option != b"close")
    if chunked:
        body = bytearray()
        while True:
            size = int((await reader.readuntil(b"\r\n")).split(b";")[0], 16)
            if size == 0:
                await reader.readuntil(b"\r\n")  # no trailers from these servers
                break
            body += await reader.readexactly(size)
            await reader.readexactly(2)
        return Response(status, bytes(body), keep_alive)
    if length is not None:
        return Response(status, await reader.readexactly(length), keep_alive)
    if status in (204, 304) or 100 <= status < 200:
        return Response(status, b"", keep_alive)
    return Response(status, await reader.read(), False)  # delimited by close


# --- load generation ------------------------------------------------------------------


@dataclass
class LoadSpec:
    port: int
    requests: list[bytes]  # each request picks one of these at random
    seconds: float  # the measured window
    connections: int  # closed loop: the concurrency; open loop: the most it may open
    rate: float | None = None  # open loop: requests/s; None: closed loop
    warmup: float = 1.0  # run before the window, not counted
    max_requests: int = 1_000_000
    start_at: float = 0.0  # time.time() at which to begin (lines up several processes)
    seed: int = 0
    grace: float = 10.0  # open loop: how long to wait for stragglers after the last one
    # Closed loop: send each request once, in order (a release per waiting breakpoint);
    # when they run out the clients stop and errors count "requests exhausted".
    once: bool = False


@dataclass
class LoadResult:
    sent: int = 0
    completed: int = 0  # answered within the window
    window: float = 0.0
    latencies: list[float] = field(default_factory=list)  # seconds, within the window
    statuses: Counter = field(default_factory=Counter)
    errors: Counter = field(default_factory=Counter)
    cpu_seconds: float = 0.0  # this client process, over warm-up and window
    connects: int = 0
    max_in_flight: int = 0

    def merge(self, other: "LoadResult") -> None:
        self.sent += other.sent
        self.completed += other.completed
        self.window = max(self.window, other.window)
        self.latencies.extend(other.latencies)
        self.statuses.update(other.statuses)
        self.errors.update(other.errors)
        self.cpu_seconds += other.cpu_seconds
        self.connects += other.connects
        self.max_in_flight += other.max_in_flight


def new_event_loop() -> asyncio.AbstractEventLoop:
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop ships with uvicorn[standard]
        return asyncio.new_event_loop()
    return uvloop.new_event_loop()


def run_load(spec: LoadSpec) -> LoadResult:
    """Run one load shape in this process (its own event loop) and return the figures."""
    with asyncio.Runner(loop_factory=new_event_loop) as runner:
        return runner.run(_closed_loop(spec) if spec.rate is None else _open_loop(spec))


async def _start(spec: LoadSpec) -> tuple[float, float, float]:
    delay = spec.start_at - time.time()
    if delay > 0:
        await asyncio.sleep(delay)
    begin = time.perf_counter()
    return begin, begin + spec.warmup, begin + spec.warmup + spec.seconds


async def _closed_loop(spec: LoadSpec) -> LoadResult:
    result = LoadResult(window=spec.seconds)
    rng = random.Random(spec.seed)
    connections = [Connection(spec.port) for _ in range(spec.connections)]
    await asyncio.gather(*(c.open() for c in connections))
    cpu_before = time.process_time()
    _, window_start, window_end = await _start(spec)
    in_order = iter(spec.requests)

    def next_request() -> bytes | None:
        if not spec.once:
            return rng.choice(spec.requests)
        return next(in_order, None)

    async def client(connection: Connection) -> None:
        while result.sent < spec.max_requests:
            began = time.perf_counter()
            if began >= window_end:
                return
            raw = next_request()
            if raw is None:
                result.errors["requests exhausted"] += 1
                return
            result.sent += 1
            try:
                response = await connection.request(raw)
            except (OSError, asyncio.IncompleteReadError, HTTPError) as error:
                result.errors[type(error).__name__] += 1
                connection.close()
                await asyncio.sleep(0.01)  # a refusing server must not spin this loop
                continue
            done = time.perf_counter()
            if began >= window_start and done <= window_end:
                result.completed += 1
                result.latencies.append(done - began)
                result.statuses[response.status] += 1

    try:
        await asyncio.wait_for(
            asyncio.gather(*(client(c) for c in connections)),
            timeout=spec.warmup + spec.seconds + spec.grace,
        )
    except TimeoutError:
        result.errors["client timeout"] += 1
    result.cpu_seconds = time.process_time() - cpu_before
    result.connects = sum(c.connects for c in connections)
    result.max_in_flight = spec.connections
    for connection in connections:
        connection.close()
    return result


async def _open_loop(spec: LoadSpec) -> LoadResult:
    assert spec.rate and spec.rate > 0
    result = LoadResult(window=spec.seconds)
    rng = random.Random(spec.seed)
    idle: deque[Connection] = deque(Connection(spec.port) for _ in range(min(8, spec.connections)))
    await asyncio.gather(*(c.open() for c in idle))
    every = list(idle)
    queued: deque[asyncio.Future] = deque()
    in_flight = [0]
    loop = asyncio.get_running_loop()

    async def acquire() -> Connection:
        if idle:
            return idle.popleft()
        if len(every) < spec.connections:
            every.append(Connection(spec.port))
            return every[-1]
        waiter = loop.create_future()
        queued.append(waiter)
        return await waiter

    def give_back(connection: Connection) -> None:
        while queued:
            waiter = queued.popleft()
            if not waiter.done():
                waiter.set_result(connection)
                return
        idle.append(connection)

    async def one(due: float, counted: bool) -> None:
        in_flight[0] += 1
        result.max_in_flight = max(result.max_in_flight, in_flight[0])
        connection = await acquire()
        try:
            response = await connection.request(rng.choice(spec.requests))
        except (OSError, asyncio.IncompleteReadError, HTTPError) as error:
            result.errors[type(error).__name__] += 1
            connection.close()
            return
        finally:
            in_flight[0] -= 1
            give_back(connection)
        if counted:
            # From when it was due, however long it queued for a connection.
            result.latencies.append(time.perf_counter() - due)
            result.completed += 1
            result.statuses[response.status] += 1

    total = min(spec.max_requests, int(spec.rate * (spec.warmup + spec.seconds)))
    warm = int(spec.rate * spec.warmup)
    cpu_before = time.process_time()
    begin, _, _ = await _start(spec)
    tasks = set()
    for i in range(total):
        due = begin + i / spec.rate
        wait = due - time.perf_counter()
        if wait > 0.0005:
            await asyncio.sleep(wait)
        task = asyncio.create_task(one(due, i >= warm))
        tasks.add(task)
        task.add_done_callback(tasks.discard)
        result.sent += 1
    if tasks:
        _, pending = await asyncio.wait(set(tasks), timeout=spec.grace)
        for task in pending:
            task.cancel()
            result.errors["not answered in time"] += 1
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.gather(*pending, return_exceptions=True)
    result.cpu_seconds = time.process_time() - cpu_before
    result.connects = sum(c.connects for c in every)
    for connection in every:
        connection.close()
    return result

"""A TCP proxy on 127.0.0.1 that a test can switch to refuse: a database that goes away.

`refuse()` closes the listening socket and every connection through it (the server side of
a PostgreSQL restart: pooled connections break, new ones are refused); `accept()` listens
again on the same port. Only the processes pointed at the proxy see the outage.
"""

import socket
import threading
from contextlib import suppress


class TcpProxy:
    def __init__(self, target_host: str, target_port: int):
        self.target = (target_host, target_port)
        self._listener: socket.socket | None = None
        self._open: set[socket.socket] = set()
        self._lock = threading.Lock()
        self.port = self._listen(0)

    def _listen(self, port: int) -> int:
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", port))
        listener.listen(64)
        self._listener = listener
        threading.Thread(target=self._accept_loop, args=(listener,), daemon=True).start()
        return listener.getsockname()[1]

    def _accept_loop(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return  # refuse() closed it
            try:
                upstream = socket.create_connection(self.target, timeout=5)
            except OSError:
                client.close()
                continue
            upstream.settimeout(None)
            with self._lock:
                self._open.update((client, upstream))
            for source, sink in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(source, sink), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket) -> None:
        with suppress(OSError):
            while data := source.recv(65536):
                sink.sendall(data)
        for sock in (source, sink):
            self._close(sock)

    def _close(self, sock: socket.socket) -> None:
        with self._lock:
            self._open.discard(sock)
        with suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)
        sock.close()

    def refuse(self) -> None:
        """Connections are refused, and the ones open are cut."""
        listener, self._listener = self._listener, None
        if listener is not None:
            with suppress(OSError):
                listener.shutdown(socket.SHUT_RDWR)  # wakes the thread blocked in accept()
            listener.close()
        with self._lock:
            cut = list(self._open)
        for sock in cut:
            self._close(sock)

    def accept(self) -> None:
        """Listen again, on the same port."""
        if self._listener is None:
            self._listen(self.port)

    def close(self) -> None:
        self.refuse()

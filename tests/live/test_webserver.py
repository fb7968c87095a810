"""The production web worker (web.webserver): workers share a burst of connections.

gunicorn is started as the Procfile starts it, with 2 workers, on a tiny app that answers
with its worker's pid (tests/standins/pid_app.py). (uvicorn's own worker, run the same
way, gave 10 to 16 of the 16 connections to one worker.)
"""

import contextlib
import os
import signal
import socket
import ssl
import subprocess
import sys
import threading
import time
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from tests.support.net import free_port

ROOT = Path(__file__).resolve().parents[2]
BALANCED = "web.webserver.BalancedUvicornWorker"
CONNECTIONS = 16


@contextlib.contextmanager
def gunicorn(worker_class: str, workers: int = 2, tls: tuple[Path, Path] | None = None):
    port = free_port()
    tls_options = ["--certfile", str(tls[0]), "--keyfile", str(tls[1])] if tls else []
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "gunicorn",
            "tests.standins.pid_app:app",
            "--worker-class",
            worker_class,
            "--workers",
            str(workers),
            "--bind",
            f"127.0.0.1:{port}",
            "--backlog",
            "4096",
            "--keep-alive",
            "75",
            "--graceful-timeout",
            "10",
            *tls_options,
        ],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        pids: set[int] = set()
        deadline = time.monotonic() + 20
        while len(pids) < workers:  # every worker up: each has answered once
            assert process.poll() is None, process.stderr.read().decode()
            assert time.monotonic() < deadline, "the workers did not start"
            with contextlib.suppress(OSError), connect(port, tls=bool(tls)) as sock:
                pids.add(int(request(sock, "/")))
            time.sleep(0.05)
        yield process, port, pids
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=10)
        process.stderr.close()


def connect(port: int, *, tls: bool = False) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    if not tls:
        return sock
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE  # the test's own self-signed certificate
    return context.wrap_socket(sock)


def self_signed(directory: Path) -> tuple[Path, Path]:
    """A certificate and key for 127.0.0.1, written to `directory`."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.now(UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - timedelta(minutes=1))
        .not_valid_after(now + timedelta(hours=1))
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = directory / "cert.pem", directory / "key.pem"
    cert_path.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_path, key_path


def request(sock: socket.socket, path: str) -> str:
    """One keep-alive GET on `sock`; the body (a pid)."""
    sock.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode())
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(4096)
        if not chunk:
            raise ConnectionError("closed before an answer")
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = next(
        int(line.split(b":", 1)[1])
        for line in head.split(b"\r\n")
        if line.lower().startswith(b"content-length:")
    )
    while len(body) < length:
        body += sock.recv(4096)
    return body.decode()


def burst_pids(port: int, workers: set[int]) -> Counter:
    """Which worker serves each of CONNECTIONS connections that arrive together: the
    workers are paused while the kernel queues them, as when they arrive faster than a
    worker wakes (a proxy opening its pool, clients reconnecting after a restart)."""
    for pid in workers:
        os.kill(pid, signal.SIGSTOP)
    try:
        sockets = [connect(port) for _ in range(CONNECTIONS)]
    finally:
        for pid in workers:
            os.kill(pid, signal.SIGCONT)
    try:
        return Counter(int(request(sock, "/")) for sock in sockets)
    finally:
        for sock in sockets:
            sock.close()


def test_a_burst_of_connections_is_shared_by_the_workers():
    with gunicorn(BALANCED) as (_, port, workers):
        for _ in range(3):
            served = burst_pids(port, workers)
            assert set(served) == workers, served
            assert min(served.values()) >= CONNECTIONS // 4, served


def test_a_keep_alive_connection_stays_with_its_worker():
    with gunicorn(BALANCED) as (_, port, _workers):
        sock = connect(port)
        with sock:
            assert len({request(sock, "/") for _ in range(20)}) == 1


def test_graceful_shutdown_finishes_requests_in_flight_and_accepts_no_more():
    with gunicorn(BALANCED, workers=1) as (process, port, _workers):
        answers: list[str] = []
        slow = connect(port)
        thread = threading.Thread(
            target=lambda: answers.append(request(slow, "/slow?seconds=1.5")), daemon=True
        )
        thread.start()
        time.sleep(0.3)  # the slow request is being served
        process.send_signal(signal.SIGTERM)
        time.sleep(0.5)
        with pytest.raises(OSError):  # refused, reset or closed: not served
            request(connect(port), "/")
        thread.join(timeout=10)
        slow.close()
        assert answers and answers[0].isdigit()
        assert process.wait(timeout=10) == 0


def test_a_stalled_tls_handshake_holds_no_other_connection(tmp_path):
    """A client that connects and never says hello must not stop the worker accepting:
    the next client is answered at once, not after the handshake timeout (60 s)."""
    with gunicorn(BALANCED, workers=1, tls=self_signed(tmp_path)) as (_, port, _workers):
        stalled = socket.create_connection(("127.0.0.1", port), timeout=10)  # no ClientHello
        with stalled:
            time.sleep(0.3)  # accepted, its handshake pending
            with connect(port, tls=True) as sock:  # its 10 s timeout: answered, not queued
                assert request(sock, "/").isdigit()

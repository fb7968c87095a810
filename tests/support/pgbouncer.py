"""Debian's PgBouncer in front of the test database, for the tests that run the service
through a pooler in transaction mode: its own port, config and log in a temporary folder,
stopped afterwards. `admin(sql)` asks its console (SHOW STATS...).

PgBouncer refuses to run as root: as root it runs as `postgres` (the folder is made
readable and writable for it)."""

import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import psycopg
from django.db import connection

from tests.support.net import free_port

CONFIG = """\
[databases]
* = host={host} port={port}
[pgbouncer]
listen_addr = 127.0.0.1
listen_port = {listen}
unix_socket_dir =
auth_type = trust
auth_file = {folder}/userlist.txt
admin_users = {user}
pool_mode = transaction
max_client_conn = 500
default_pool_size = 20
ignore_startup_parameters = extra_float_digits,options
logfile = {folder}/pgbouncer.log
pidfile = {folder}/pgbouncer.pid
"""


@dataclass(frozen=True)
class PgBouncer:
    port: int
    folder: Path
    user: str

    def admin(self, sql: str) -> list[dict]:
        """Rows of an admin console command (SHOW STATS, SHOW POOLS...)."""
        url = f"postgres://{self.user}@127.0.0.1:{self.port}/pgbouncer"
        with psycopg.connect(url, autocommit=True, prepare_threshold=None) as conn:
            cursor = conn.execute(sql)
            names = [column.name for column in cursor.description or []]
            return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]

    def log(self) -> str:
        path = self.folder / "pgbouncer.log"
        return path.read_text(errors="replace") if path.exists() else ""


def missing() -> str | None:
    return (
        None
        if shutil.which("pgbouncer")
        else "pgbouncer is not installed (apt-get install pgbouncer)"
    )


@contextmanager
def running_pgbouncer() -> Iterator[PgBouncer]:
    """PgBouncer in transaction mode before the test database's server (its folder in the
    system's temporary folder: pytest's is private to root, which pgbouncer is not)."""
    settings = connection.settings_dict
    user = settings.get("USER") or "postgres"
    folder = Path(tempfile.mkdtemp(prefix="bpm-pgbouncer-"))
    listen = free_port()
    (folder / "userlist.txt").write_text(f'"{user}" ""\n')
    (folder / "pgbouncer.ini").write_text(
        CONFIG.format(
            host=settings.get("HOST") or "127.0.0.1",
            port=settings.get("PORT") or 5432,
            listen=listen,
            folder=folder,
            user=user,
        )
    )
    command = ["pgbouncer", str(folder / "pgbouncer.ini")]
    if os.geteuid() == 0:
        folder.chmod(0o777)
        command[1:1] = ["-u", "postgres"]
    process = subprocess.Popen(
        command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True
    )
    bouncer = PgBouncer(listen, folder, user)
    try:
        deadline = time.monotonic() + 15
        while True:
            try:
                bouncer.admin("SHOW VERSION")
                break
            except psycopg.OperationalError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(
                        f"pgbouncer did not start: {process.stderr.read().decode() if process.stderr else ''}"
                        f"\n{bouncer.log()[-2000:]}"
                    ) from None
                time.sleep(0.1)
        yield bouncer
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        shutil.rmtree(folder, ignore_errors=True)

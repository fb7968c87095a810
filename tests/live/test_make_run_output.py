"""What a first `make run` prints: a few lines of progress, then where the console is and
how to get in, all of it on one screen.

A clean copy of the project (SQLite with no database yet, DEBUG=1, `.venv` linked to this
checkout's and never installed into) runs the Makefile's own `run` target until the web
process serves and the worker is ready, then is stopped with Ctrl-C.
"""

import re
import time
from pathlib import Path

from tests.support.make_run import make, project_env, stop
from tests.support.net import free_port

pytest_plugins = ["tests.support.make_run"]  # project: a clean copy, one per module

BOOT_TIMEOUT_SECONDS = 180  # a deadline for the first start, never an asserted duration
SCREEN_LINES = 40
WORKER_READY = re.compile(r"celery@\S+ ready\.")


def output_once_serving(log: Path, process) -> str:
    """The output up to the moment the console's address was printed and the worker is
    ready (the first request would come then)."""
    deadline = time.monotonic() + BOOT_TIMEOUT_SECONDS
    while time.monotonic() < deadline:
        output = log.read_text(errors="replace")
        if "/admin/" in output and "create_reviewer" in output and WORKER_READY.search(output):
            return output
        assert process.poll() is None, f"make run exited:\n{output}"
        time.sleep(0.3)
    raise AssertionError(f"make run never said where the console is:\n{log.read_text()}")


def test_a_first_make_run_names_the_console_and_the_first_account_on_one_screen(
    project,
    tmp_path,
):
    assert not (project / "db.sqlite3").exists()  # a first run: every migration to apply
    port = free_port()
    log = tmp_path / "make-run.log"
    process = make(project, "run", project_env(project, tmp_path, port), log)
    try:
        output = output_once_serving(log, process)
    finally:
        stop(process)

    lines = output.splitlines()
    assert len(lines) <= SCREEN_LINES, output
    console = f"the console is at http://127.0.0.1:{port}/admin/"
    assert any(console in line for line in lines), output
    [account] = [line for line in lines if "manage.py create_reviewer" in line]
    assert account.endswith("DEBUG=1 .venv/bin/python manage.py create_reviewer YOUR-NAME --admin")
    # The migrations in one line, not one line each.
    applied = re.search(r"^database ready \((\d+) migrations applied\)$", output, re.MULTILINE)
    assert applied and int(applied.group(1)) > 50, output
    assert "Applying " not in output, output
    # Nothing that only concerns SQLite or a production host's limits.
    assert "Silence this warning" not in output and "models.W040" not in output, output
    assert "WARNING web.openfiles" not in output, output
    # No Celery banner (its [tasks] list alone is a dozen lines).
    assert "[tasks]" not in output and "celery beat v" not in output, output

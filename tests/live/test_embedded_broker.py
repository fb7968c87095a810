"""The embedded broker under load: thousands of messages published by two processes while a
real Celery worker consumes them and busy processes compete for the CPU. Every message is
processed exactly once and the worker never stops (issue 31: kombu's filesystem transport
let the worker read a message's file before it was written, exit on `JSONDecodeError` and
lose the message).

The worker runs as Procfile.dev runs it, on the project's settings with no REDIS_URL, in a
folder of its own, plus a test task (tests/live/embedded_broker_tasks.py, loaded with -I)
and a larger prefetch: with one message per pool process in hand, the worker waits for the
next poll whenever both are busy, the queue grows and the worker only ever reads old
messages; reading ahead, it keeps up with the publishers and reads the newest files, those
still being written.
"""

import os
import sys
from collections import Counter
from pathlib import Path

from tests.live.embedded_broker_tasks import RECORD_FILE
from tests.support.system import Process, wait_until

BIN = Path(sys.executable).parent
TASK = "tests.live.embedded_broker_tasks.record"
MESSAGES = 3000
PUBLISHERS = 2
BUSY_PROCESSES = 2
DEADLINE_SECONDS = 90.0

PUBLISH = f"""
import sys, django
django.setup()
from config.celery import app
first, count = int(sys.argv[1]), int(sys.argv[2])
for number in range(first, first + count):
    app.send_task({TASK!r}, args=[number])
"""
BUSY = f"""
import time
end = time.monotonic() + {DEADLINE_SECONDS}
while time.monotonic() < end:
    pass
"""


def embedded_env(tmp_path: Path) -> dict[str, str]:
    """Production settings on the embedded broker under tmp_path, SQLite there too."""
    unset = {"REDIS_URL", "DATABASE_URL", "DJANGO_ALLOW_ASYNC_UNSAFE"}
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in unset and not k.startswith(("BPM_", "CELERY_"))
    }
    return {
        **env,
        "DJANGO_SETTINGS_MODULE": "config.settings",
        "PYTHONUNBUFFERED": "1",
        "DEBUG": "0",
        "SECRET_KEY": "embedded-broker-test-key",
        "BPM_EMBEDDED_BROKER": "1",
        "BPM_VAR_DIR": str(tmp_path / "var"),
        "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}",
        "LOG_FORMAT": "plain",
        RECORD_FILE: str(tmp_path / "record.txt"),
    }


def start_worker(env: dict[str, str], log_dir: Path) -> Process:
    command = [str(BIN / "celery"), "-A", "config", "worker", "--loglevel", "INFO"]
    options = ["--concurrency", "2", "-I", "tests.live.embedded_broker_tasks"]
    worker = Process("worker", [*command, *options, "--prefetch-multiplier", "50"], env, log_dir)
    worker.start()
    wait_until(lambda: " ready." in worker.output(last=200_000), what="the worker", logs=[worker])
    return worker


def recorded(env: dict[str, str]) -> Counter[int]:
    try:
        lines = Path(env[RECORD_FILE]).read_text().split()
    except FileNotFoundError:
        return Counter()
    return Counter(int(line) for line in lines)


def publish_under_load(env: dict[str, str], log_dir: Path, worker: Process) -> None:
    """Publish MESSAGES from PUBLISHERS processes while BUSY_PROCESSES spin, until the
    worker has recorded as many runs (or exits, or the deadline passes: the test fails)."""
    busy = [
        Process(f"busy-{n}", [sys.executable, "-c", BUSY], env, log_dir).start()
        for n in range(BUSY_PROCESSES)
    ]
    share = MESSAGES // PUBLISHERS
    publishers = [
        Process(
            f"publisher-{n}",
            [sys.executable, "-c", PUBLISH, str(n * share), str(share)],
            env,
            log_dir,
        )
        for n in range(PUBLISHERS)
    ]
    try:
        for publisher in publishers:
            publisher.expected_alive = False  # they end when they have published
            publisher.start()
        for publisher in publishers:
            assert publisher.popen.wait(timeout=DEADLINE_SECONDS) == 0, publisher.output()
        wait_until(
            lambda: sum(recorded(env).values()) >= MESSAGES,
            what=f"the worker to run {MESSAGES} tasks",
            timeout=DEADLINE_SECONDS,
            logs=[worker],
        )
    finally:
        for process in busy:
            process.stop()


def test_every_message_is_processed_exactly_once_and_the_worker_never_stops(tmp_path):
    env = embedded_env(tmp_path)
    worker = start_worker(env, tmp_path)
    try:
        publish_under_load(env, tmp_path, worker)
        still_running = worker.alive
    finally:
        worker.stop()

    runs = recorded(env)
    assert sorted(set(range(MESSAGES)) - set(runs)) == []
    assert {number: count for number, count in runs.items() if count > 1} == {}
    assert still_running, worker.output()
    log = worker.output(last=10_000_000)
    assert "Unrecoverable error" not in log
    assert "is not a message" not in log

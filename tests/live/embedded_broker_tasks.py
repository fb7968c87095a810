"""A task only the embedded broker's stress test loads in its worker (`celery worker -I`):
each run appends its number, one line, to the file EMBEDDED_BROKER_TEST_RECORD names."""

import os

from config.celery import app

RECORD_FILE = "EMBEDDED_BROKER_TEST_RECORD"


@app.task(name="tests.live.embedded_broker_tasks.record")
def record(number: int) -> None:
    # One write to a file opened for appending: the pool processes' lines never mix.
    descriptor = os.open(os.environ[RECORD_FILE], os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    try:
        os.write(descriptor, f"{number}\n".encode())
    finally:
        os.close(descriptor)

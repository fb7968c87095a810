"""The embedded broker's transport (infra/embedded_broker.py): a message is visible only
whole, each is read once, a file that is not a message never stops the reader.

The transport runs on real folders; the concurrent run with a real worker under load is
tests/live/test_embedded_broker.py.
"""

import json
import logging
import os
import subprocess
import sys
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from queue import Empty
from typing import Any

import pytest
from kombu import Connection, Exchange, Queue

from tests.support.project import ROOT

TRANSPORT = "infra.embedded_broker:Transport"
QUEUE = "jobs"


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    (tmp_path / "queue").mkdir()
    return tmp_path / "queue"


@pytest.fixture
def connect(tmp_path: Path, folder: Path) -> Iterator[Callable[[], Connection]]:
    """A new connection to the broker in tmp_path, as another process would open one."""
    options = {
        "data_folder_in": str(folder),
        "data_folder_out": str(folder),
        "control_folder": str(tmp_path / "control"),
        "polling_interval": 0.01,
    }
    opened: list[Connection] = []

    def connect() -> Connection:
        connection = Connection(
            "filesystem://localhost//", transport=TRANSPORT, transport_options=options
        )
        opened.append(connection)
        return connection

    yield connect
    for connection in opened:
        connection.release()


class Observed(dict):
    """A message that calls `look` while the transport encodes it, that is, while the
    message is being written."""

    def __init__(self, look: Callable[[], None], **fields: Any):
        super().__init__(**fields)
        self.look = look

    def items(self):  # what the JSON encoder asks a dict subclass for
        self.look()
        return super().items()


def test_a_published_message_is_received_whole_and_only_once(connect):
    with connect().SimpleQueue(QUEUE) as producer:
        producer.put({"number": 1, "text": "é" * 10_000})

    with connect().SimpleQueue(QUEUE) as consumer:
        message = consumer.get(timeout=5)
        message.ack()
        with pytest.raises(consumer.Empty):
            consumer.get(timeout=0.2)

    assert message.payload == {"number": 1, "text": "é" * 10_000}


def test_a_reader_looking_while_a_message_is_written_finds_no_message(connect):
    writer, reader = connect().default_channel, connect().default_channel
    seen: list[Any] = []

    def look() -> None:
        try:
            seen.append(reader._get(QUEUE))
        except Empty:
            seen.append("nothing")
        except ValueError as exc:  # kombu's own transport: the file is there, still empty
            seen.append(exc)

    writer._put(QUEUE, Observed(look, number=7))

    assert seen == ["nothing"]
    assert reader._get(QUEUE) == {"number": 7}


def test_a_file_still_being_written_is_never_taken_for_a_message(connect, folder):
    channel = connect().default_channel
    partial = folder / f".1_partial.{QUEUE}.msg.tmp"
    partial.write_text('{"body": "eyJu')

    with pytest.raises(Empty):
        channel._get(QUEUE)
    assert channel._size(QUEUE) == 0
    assert partial.read_text() == '{"body": "eyJu'


def test_a_put_leaves_one_message_file_and_nothing_else(connect, folder):
    connect().default_channel._put(QUEUE, {"number": 1})

    [name] = os.listdir(folder)
    assert name.endswith(f".{QUEUE}.msg") and not name.startswith(".")
    assert json.loads((folder / name).read_text()) == {"number": 1}


def test_a_file_that_is_not_a_message_is_set_aside_and_the_next_message_read(
    connect, folder, caplog
):
    (folder / f"0_empty.{QUEUE}.msg").write_bytes(b"")
    channel = connect().default_channel
    channel._put(QUEUE, {"number": 2})

    with caplog.at_level(logging.ERROR, logger="infra.embedded_broker"):
        assert channel._get(QUEUE) == {"number": 2}

    assert os.listdir(folder) == [f".0_empty.{QUEUE}.msg.unreadable"]
    assert "0_empty.jobs.msg is not a message" in caplog.text


def test_two_readers_take_each_message_exactly_once(connect):
    writer = connect().default_channel
    for number in range(300):
        writer._put(QUEUE, {"number": number})
    taken: list[list[int]] = [[], []]

    def read(into: list[int]) -> None:
        channel = connect().default_channel
        while True:
            try:
                into.append(channel._get(QUEUE)["number"])
            except Empty:
                return

    readers = [threading.Thread(target=read, args=(into,)) for into in taken]
    for reader in readers:
        reader.start()
    for reader in readers:
        reader.join(timeout=60)

    assert Counter(taken[0] + taken[1]) == Counter(range(300))


def test_bindings_made_by_two_connections_both_receive_a_broadcast(connect, tmp_path):
    broadcast = Exchange("broadcast", type="fanout")
    for name in ("first", "second"):
        Queue(name, broadcast)(connect().default_channel).declare()

    with connect().Producer() as producer:
        producer.publish({"hello": "all"}, exchange=broadcast, declare=[broadcast])

    for name in ("first", "second"):
        with connect().SimpleQueue(Queue(name, broadcast)) as consumer:
            assert consumer.get(timeout=5).payload == {"hello": "all"}
    assert os.listdir(tmp_path / "control") == ["broadcast.exchange"]


def test_without_redis_the_workers_use_this_transport(tmp_path):
    environment = {k: v for k, v in os.environ.items() if k not in {"REDIS_URL"}}
    code = "from django.conf import settings; print(settings.CELERY_BROKER_TRANSPORT)"
    result = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env={
            **environment,
            "DJANGO_SETTINGS_MODULE": "config.settings",
            "BPM_VAR_DIR": str(tmp_path),
        },
        capture_output=True,
        text=True,
        timeout=60,
    )

    assert result.stdout.strip() == TRANSPORT, result.stderr

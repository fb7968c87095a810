"""The embedded broker: kombu's filesystem transport, made so that no reader sees a message
before it is whole.

Kombu's writer creates a message's file under its final name, then locks and writes it; the
reader lists the folder, moves a file away (to the system's temporary folder: on another
file system that is a copy) and reads it without the lock. A reader that comes between the
creation and the write reads an empty or partial file: ``JSONDecodeError``, which Celery
treats as an unrecoverable error (the worker exits), and the message is gone, deleted before
it was decoded. Under load that happened every minute or so.

Here a message is written under a hidden name in the queue's folder (``.<name>.tmp``: the
reader takes only the names whose part after the first dot is ``<queue>.msg``) and renamed
to its final name once written. A rename within one folder is atomic: the name appears with
the whole message behind it. The reader claims a message by renaming it to a hidden name in
the same folder (of two readers exactly one wins the rename), reads it, then deletes it, or
moves it into ``processed_folder`` with ``store_processed``. A file that still does not
decode (written by hand, or cut short by a power loss) is logged and set aside as
``.<name>.unreadable``; the worker keeps running.

The exchange tables (``control_folder``: which queues an exchange routes to, read at every
publish and by ``celery inspect``/broadcasts) had the same gap when a table was created
(created empty, then locked and written; two creators could also overwrite each other).
A new table is written under a hidden name and linked into place, which fails if another
process created it first; updates stay kombu's, in place under the file's lock.

Unacknowledged messages: a claimed message lives only in the consuming worker's memory
until it is acknowledged (after the task, ``CELERY_TASK_ACKS_LATE``). A warm shutdown puts
the unacknowledged ones back into the folder; a worker that is killed (SIGKILL, out of
memory, power loss) loses them, as it loses one claimed but not yet read. Nothing here
recovers those: the outbox sweeps send every delivery and event still pending again, and
beat's periodic tasks run at their next tick. Redis (``REDIS_URL``) keeps them.

Kombu's SQLAlchemy transport on a SQLite file was the alternative: it needs SQLAlchemy
(not otherwise a dependency), has no fanout (``celery inspect`` and broadcasts would reach
no worker), takes SQLite's write lock at every poll and keeps every delivered row.
"""

import logging
import os
import shutil
import uuid
from pathlib import Path
from queue import Empty
from time import monotonic
from typing import Any

from kombu.exceptions import ChannelError
from kombu.transport import filesystem
from kombu.utils.encoding import bytes_to_str, str_to_bytes
from kombu.utils.json import dumps, loads

logger = logging.getLogger(__name__)


def message_name(queue: str) -> str:
    """A new message's file name, as kombu names it (oldest first when sorted)."""
    return f"{round(monotonic() * 1000)}_{uuid.uuid4()}.{queue}.msg"


def hidden(name: str, state: str) -> str:
    """The name of a file that no reader takes for a message (nor for an exchange table)."""
    return f".{name}.{state}"


class Channel(filesystem.Channel):
    # kombu's filesystem Channel names the message `payload`, its base class `message`.
    def _put(self, queue: str, payload: Any, **kwargs: Any) -> None:  # type: ignore[override]
        """Write the message under a hidden name, then give it its name in one rename."""
        name = message_name(queue)
        temporary = os.path.join(self.data_folder_out, hidden(name, "tmp"))
        try:
            with open(temporary, "wb") as file:
                file.write(str_to_bytes(dumps(payload)))
            os.replace(temporary, os.path.join(self.data_folder_out, name))
        except OSError as exc:
            Path(temporary).unlink(missing_ok=True)
            raise ChannelError(f"Cannot add file {name!r} to directory") from exc

    def _get(self, queue: str, timeout: float | None = None) -> Any:
        """The oldest message of `queue`, claimed by a rename (another reader gets the next)."""
        wanted = f"{queue}.msg"
        folder = self.data_folder_in
        for name in sorted(os.listdir(folder)):
            if name.partition(".")[2] != wanted:
                continue
            claimed = os.path.join(folder, hidden(name, "claimed"))
            try:
                os.rename(os.path.join(folder, name), claimed)
            except FileNotFoundError:
                continue  # claimed by another reader since the listing
            except OSError as exc:
                raise ChannelError(f"Cannot claim file {name!r} from queue.") from exc
            message = self._take(name, claimed)
            if message is not None:
                return message
        raise Empty()

    def _take(self, name: str, claimed: str) -> Any:
        """The claimed message, its file deleted or stored; None if it does not decode."""
        try:
            with open(claimed, "rb") as file:
                payload = file.read()
            message = loads(bytes_to_str(payload))
        except OSError as exc:
            raise ChannelError(f"Cannot read file {name!r} from queue.") from exc
        except ValueError:
            unreadable = os.path.join(os.path.dirname(claimed), hidden(name, "unreadable"))
            os.replace(claimed, unreadable)
            logger.error("embedded broker: %s is not a message; set aside as %s", name, unreadable)
            return None
        if self.store_processed:
            shutil.move(claimed, os.path.join(self.processed_folder, name))
        else:
            os.remove(claimed)
        return message

    def _queue_bind(self, exchange: str, routing_key: str, pattern: str, queue: str) -> None:
        file = self._exchange_file(exchange)
        if not file.exists():
            binding = filesystem.exchange_queue_t(routing_key or "", pattern or "", queue or "")
            if self._create_table(file, [binding]):
                return
        super()._queue_bind(exchange, routing_key, pattern, queue)  # in place, locked

    def _create_table(self, file: Path, table: list) -> bool:
        """Create an exchange table whole; False if another process created it first."""
        self.control_folder.mkdir(exist_ok=True)
        temporary = file.with_name(hidden(f"{file.name}.{uuid.uuid4().hex}", "tmp"))
        try:
            temporary.write_bytes(str_to_bytes(dumps(table)))
            os.link(temporary, file)  # unlike a rename, never replaces an existing table
        except FileExistsError:
            return False
        except OSError as exc:
            raise ChannelError(f"Cannot open {file}") from exc
        finally:
            temporary.unlink(missing_ok=True)
        return True


class Transport(filesystem.Transport):
    Channel = Channel

"""Kombu's Redis transport, made to let a worker outlive Redis dropping while it is busy.

When the connection is lost while a task (acknowledged late) runs and the consumer is also
waiting on Redis for the next message, kombu detaches the connection's transport before it
closes the consumer's channel. Closing that channel then restores the unacknowledged message
through a new connection pool, whose parameters come from the detached connection:
``AttributeError: 'NoneType' object has no attribute 'hostname'``. Celery treats that as an
unrecoverable error and the worker exits. The same happens when a task started before the
outage is acknowledged on its old channel afterwards.

Here a channel whose connection is gone raises a broker connection error instead, which
kombu and Celery already expect at those places: the worker logs it and reconnects. The
message is not lost: Redis keeps it among the unacknowledged (restored after the visibility
timeout), and the outbox sweeps re-publish any row still pending.
"""

from typing import Any

from kombu.transport import redis as kombu_redis
from redis.exceptions import ConnectionError as RedisConnectionError


class Channel(kombu_redis.Channel):
    def _connparams(self, asynchronous: bool = False) -> dict[str, Any]:
        if self.connection is None or self.connection.client is None:
            raise RedisConnectionError("the broker connection of this channel is closed")
        return super()._connparams(asynchronous=asynchronous)


class Transport(kombu_redis.Transport):
    Channel = Channel

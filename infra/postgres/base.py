"""Django's PostgreSQL backend, with connections from the pool checked for a cut socket.

A connection that sat idle in the pool may have been cut meanwhile: the database
restarted, or a proxy dropped it. Handed out as it is, the request using it fails (a 503)
although the database answers again. psycopg_pool's own check (Django's
CONN_HEALTH_CHECKS) costs a round trip on every checkout, and after a restart it backs off
a second or more per dead connection, so a pool of several dead ones times out.

Here a connection taken from the pool is looked at without a round trip: the server says
nothing on an idle connection (pool connections listen to no channel), so a socket with
something to read (the server's goodbye, or the end of the stream) or none at all is a
cut connection. It is closed and handed back (the pool replaces it) and the next one is
taken, at once: no request is given a connection the server has already let go.
"""

import select
from typing import Any

from django.db.backends.postgresql import base, operations
from psycopg import ClientCursor, pq


def is_cut(connection: Any) -> bool:
    """Whether the server has let this idle connection go (no round trip: a poll)."""
    if connection.closed or connection.pgconn.status != pq.ConnStatus.OK:
        return True
    try:
        readable, _, _ = select.select([connection.pgconn.socket], [], [], 0)
    except (OSError, ValueError, Exception):  # noqa: BLE001 - no socket: as good as cut
        return True
    return bool(readable)


class DatabaseOperations(operations.DatabaseOperations):
    def last_executed_query(self, cursor: Any, sql: str, params: Any) -> str:
        """The statement with its values in place, as logged (DEBUG, CaptureQueriesContext)
        also for a statement bound on the server (infra.db.prepared): Django reads the text a
        client-side cursor sent, which such a cursor never writes."""
        if isinstance(cursor, ClientCursor) or params is None:
            return super().last_executed_query(cursor, sql, params)
        return self.compose_sql(sql, params)


class DatabaseWrapper(base.DatabaseWrapper):
    ops_class = DatabaseOperations

    def get_new_connection(self, conn_params: dict[str, Any]) -> Any:
        connection = super().get_new_connection(conn_params)
        if not self.pool:
            return connection
        # Every connection in the pool may have been cut (a restart): try each once.
        for _ in range(self.pool.max_size):
            if not is_cut(connection):
                return connection
            connection.close()
            self.pool.putconn(connection)  # a closed one is dropped and replaced
            connection = super().get_new_connection(conn_params)
        return connection

"""Log records carry the request id of the request that produced them (or "-")."""

import logging
from contextvars import ContextVar

current_request_id: ContextVar[str] = ContextVar("current_request_id", default="-")


class RequestIDFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        record.request_id = current_request_id.get()
        return True

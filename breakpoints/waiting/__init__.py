"""Waiting: agents hold a status request open until their breakpoint is decided.

- query: what a status request asks for (ids, wait), validated the same on every path
- bodies: the status answers, and the pollAfterMs hint that grows with load
- hub: this process's waiters, woken by notifications and a safety re-check
- listener: the one PostgreSQL LISTEN connection per process, reconnecting with backoff
- bridge: runs the synchronous reads (ORM) on a few threads, never while waiting
- asgi: the thin handler in front of Django that serves the status paths without a thread
- blocking: the same waits for WSGI and session callers (threads; development only)
"""

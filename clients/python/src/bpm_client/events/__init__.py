"""Events for Breakpoint Manager's trigger rules, sent from beside a repository (`bpm events`).

`sending`: sign (generic-hmac) and post one event to `<url>/api/events/<source>`;
`githooks`: git hooks that send `git.<hook>` events with `bpm events send`; `watching`:
file changes as `file.*` events (watchdog, the `watch` extra). The server verifies what
they send in `triggers/verification.py`; nothing here imports the server.
"""

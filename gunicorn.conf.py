"""gunicorn settings and hooks (read from the working directory): Prometheus multiprocess
bookkeeping, the client address, no control socket.

With PROMETHEUS_MULTIPROC_DIR set, each web process writes its metrics to files there
(ops/metrics.py). The master empties the directory when it starts, so counters never
resume from a previous run, and drops a dead worker's live gauges (open long-polls,
listener state) so that they stop counting; its counters and histograms stay summed.
"""

import os
from pathlib import Path


def on_starting(server) -> None:
    directory = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
    if directory:
        path = Path(directory)
        path.mkdir(parents=True, exist_ok=True)
        for stale in path.glob("*.db"):  # only prometheus_client's own files
            stale.unlink()


def child_exit(server, worker) -> None:
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        from prometheus_client import multiprocess

        multiprocess.mark_process_dead(worker.pid)


# The client's address is the peer's: the app alone reads X-Forwarded-For, trusting exactly
# BPM_NUM_PROXIES hops (infra.ratelimits.address_of). uvicorn would otherwise rewrite
# the peer from X-Forwarded-For for connections from 127.0.0.1 (its default), so anyone on
# the host could pick their address and escape the login lockout and per-address limits.
forwarded_allow_ips = ""

# No control socket (gunicornc): gunicorn would make it under $HOME/.gunicorn, which the
# image's user cannot write (an ERROR at every start), and several servers on one host would
# share its path. Signals manage the server here: TERM stops it, HUP reloads, TTIN/TTOU
# add and remove workers.
control_socket_disable = True

"""gunicorn hooks (read from the working directory): Prometheus multiprocess bookkeeping.

With PROMETHEUS_MULTIPROC_DIR set, each web process writes its metrics to files there
(config/metrics.py). The master empties the directory when it starts, so counters never
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

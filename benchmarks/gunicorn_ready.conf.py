"""gunicorn's configuration for the benchmarks' servers: the project's own hooks
(gunicorn.conf.py), and a file per worker in BPM_BENCH_READY_DIR once the worker has loaded
its application (http_servers.Server waits for every worker's).

Without it a benchmark could start while one worker is still importing Django: the
connections its client opens together all land on the worker that is up, and stay there
(keep-alive), so one process serves the whole run on one core.
"""

import os
from pathlib import Path

_PROJECT_HOOKS = Path(__file__).resolve().parent.parent / "gunicorn.conf.py"
exec(compile(_PROJECT_HOOKS.read_text(), str(_PROJECT_HOOKS), "exec"))  # noqa: S102


def post_worker_init(worker) -> None:
    directory = os.environ.get("BPM_BENCH_READY_DIR")
    if directory:
        Path(directory, str(os.getpid())).touch()

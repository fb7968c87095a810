"""The image's HEALTHCHECK: the web role's /healthz on $PORT answers 200 (exit 0), else 1.

The other roles serve no HTTP: a container whose process (PID 1) is not gunicorn passes
(compose.yaml gives the worker a check of its own, `celery inspect ping`).
"""

import os
import sys
import urllib.request
from pathlib import Path


def serves_http() -> bool:
    try:
        return b"gunicorn" in Path("/proc/1/cmdline").read_bytes()
    except OSError:
        return True


if not serves_http():
    sys.exit(0)
url = f"http://127.0.0.1:{os.environ.get('PORT') or '8000'}/healthz"
try:
    with urllib.request.urlopen(url, timeout=4) as response:
        sys.exit(0 if response.status == 200 else 1)
except OSError as exc:
    print(f"{url}: {exc}", file=sys.stderr)
    sys.exit(1)

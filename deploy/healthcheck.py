"""The image's HEALTHCHECK: the web role's /healthz on $PORT answers 200 (exit 0), else 1."""

import os
import sys
import urllib.request

url = f"http://127.0.0.1:{os.environ.get('PORT') or '8000'}/healthz"
try:
    with urllib.request.urlopen(url, timeout=4) as response:
        sys.exit(0 if response.status == 200 else 1)
except OSError as exc:
    print(f"{url}: {exc}", file=sys.stderr)
    sys.exit(1)

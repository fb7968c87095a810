#!/bin/sh
# The image's entrypoint: one role per container. Each execs its process (no shell stays
# in between), so the container's SIGTERM reaches gunicorn or Celery directly.
#
#   web [ARGS]        the Procfile's web line (gunicorn, uvicorn workers) on $PORT (8000);
#                     SIGTERM: stops accepting, in-flight requests and waits finish
#                     (graceful timeout 70 s), exit 0
#   worker [ARGS]     the Procfile's worker line (Celery, the `celery` queue: sweeps,
#                     deliveries); SIGTERM: the running task finishes, fetched ones go
#                     back to the queue, exit 0
#   triggers [ARGS]   the Procfile's triggers line (Celery, the `triggers` queue: the
#                     evaluation of external events); SIGTERM: as worker
#   beat [ARGS]       the Procfile's beat line (Celery beat; run exactly one); exit 0
#   migrate           what a release needs (create a missing database when allowed, apply
#                     the migrations; static files are collected in the image), exit 0
#   manage ARGS...    any management command: manage create_agent_token agent-7
#   help              this text
# ARGS are appended to the role's command line (worker --concurrency 2).
set -eu
cd /app

procfile_line() {
  line=$(sed -n "s/^$1: //p" Procfile)
  if [ -z "$line" ]; then
    echo "entrypoint: no '$1:' line in the Procfile" >&2
    exit 64
  fi
  printf '%s' "$line"
}

usage() {
  sed -n '2,/^set -eu/p' "$0" | sed -e '/^set -eu/d' -e 's/^# \{0,1\}//'
}

role=${1:-web}
[ "$#" -gt 0 ] && shift

case $role in
  web)
    # Each web process writes its metrics here, summed by /metrics (ops/metrics.py).
    export PROMETHEUS_MULTIPROC_DIR="${PROMETHEUS_MULTIPROC_DIR:-/tmp/bpm-metrics}"
    line=$(procfile_line web)
    eval "exec $line \"\$@\""
    ;;
  worker | triggers | beat)
    line=$(procfile_line "$role")
    eval "exec $line \"\$@\""
    ;;
  migrate)
    python -m devtools.database
    exec python manage.py migrate --noinput "$@"
    ;;
  manage)
    exec python manage.py "$@"
    ;;
  help | -h | --help)
    usage
    ;;
  *)
    echo "entrypoint: unknown role '$role'; the roles are web, worker, triggers, beat, migrate, manage." >&2
    usage >&2
    exit 64
    ;;
esac

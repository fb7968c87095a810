#!/usr/bin/env bash
# The project installed as production installs it, without the dev extras: `pip install .`
# (not editable) into a throwaway virtualenv, from a copy of the working tree. With only
# what that installs, the Procfile's release step (migrate, collectstatic) runs and its web,
# worker and beat start against PostgreSQL and Redis:
#   web     answers /readyz 200 (database and broker ok) and the console's login page
#           (templates, and static files from the release's collectstatic);
#   worker  answers `celery inspect ping`;
#   beat    sends its due sweep, which the worker runs (a task through Redis, end to end).
# Every wait is bounded; whatever happens, the processes it started are stopped and the
# temporary folder (venv, copy, logs) removed. `.ci/run` runs it as the phase `nodev`.
#
# NODEV_DATABASE_URL  a PostgreSQL database of its own (created when missing, migrated);
#                     default postgres://postgres@127.0.0.1:5432/bpm_nodev_smoke
# NODEV_REDIS_URL     default redis://127.0.0.1:6379/14 (not the suite's database number)
# NODEV_WAIT_SECONDS  how long each process may take to pass its check (default 90)
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
database_url=${NODEV_DATABASE_URL:-postgres://postgres@127.0.0.1:5432/bpm_nodev_smoke}
redis_url=${NODEV_REDIS_URL:-redis://127.0.0.1:6379/14}
wait_seconds=${NODEV_WAIT_SECONDS:-90}
work=$(mktemp -d "${TMPDIR:-/tmp}/bpm-nodev.XXXXXX")
venv=$work/venv
src=$work/src
logs=$work/logs
declare -A pids=()

say() { echo "nodev: $*"; }

stop_all() {
  local name pid deadline=$((SECONDS + 20))
  for name in "${!pids[@]}"; do kill -TERM "${pids[$name]}" 2>/dev/null || true; done
  for name in "${!pids[@]}"; do
    pid=${pids[$name]}
    while kill -0 "$pid" 2>/dev/null && ((SECONDS < deadline)); do sleep 0.2; done
    kill -0 "$pid" 2>/dev/null && say "$name did not stop within 20 s of SIGTERM; killing it"
    # Its children too (pool processes, gunicorn workers), should any outlive it.
    kill -KILL -- "-$pid" 2>/dev/null || true
  done
  pids=()
}

cleanup() {
  local status=$?
  stop_all
  if ((status != 0)) && [ -d "$logs" ]; then
    for log in "$logs"/*.log; do
      [ -e "$log" ] || continue
      echo "----- last lines of $(basename "$log") -----"
      tail -n 40 "$log"
    done
  fi
  rm -rf "$work"
  exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

fail() {
  say "FAILED: $*" >&2
  exit 1
}

# The processes see only this environment: nothing of the caller's PYTHONPATH, virtualenv
# or DATABASE_URL (the suite's) leaks in.
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
run_env=(
  env -i "PATH=$venv/bin:/usr/local/bin:/usr/bin:/bin" "HOME=$work" "LANG=C.UTF-8"
  "TMPDIR=${TMPDIR:-/tmp}" DEBUG=0 SECRET_KEY=nodev-smoke-only-key
  ALLOWED_HOSTS=127.0.0.1,localhost "DATABASE_URL=$database_url" "REDIS_URL=$redis_url"
  "PORT=$port" WEB_CONCURRENCY=1 WORKER_CONCURRENCY=1 "BPM_VAR_DIR=$work/var"
  "STATIC_ROOT=$work/static" LOG_FORMAT=plain LOG_LEVEL_TASKS=INFO BPM_TTL_SWEEP_SECONDS=1
)

# A Procfile line's command, run from the copy in a session of its own (so that stopping
# it stops its children: gunicorn's and celery's workers).
start() {
  local name=$1 command
  command=$(sed -n "s/^$name: //p" "$src/Procfile")
  [ -n "$command" ] || fail "no '$name:' line in the Procfile"
  (cd "$src" && exec setsid "${run_env[@]}" bash -c "exec $command") >"$logs/$name.log" 2>&1 &
  pids[$name]=$!
  say "started $name (pid ${pids[$name]}): $command"
}

alive() {
  kill -0 "${pids[$1]}" 2>/dev/null || fail "$1 exited (see its log below)"
}

http_status() {
  "$venv/bin/python" - "$1" <<'EOF'
import sys, urllib.error, urllib.request
try:
    print(urllib.request.urlopen(sys.argv[1], timeout=5).status)
except urllib.error.HTTPError as exc:
    print(exc.code)
except OSError:
    print(0)
EOF
}

# Run `check` (a function) until it succeeds, at most wait_seconds; `process` must stay up.
wait_for() {
  local what=$1 process=$2 check=$3 deadline=$((SECONDS + wait_seconds)) start=$SECONDS
  until "$check"; do
    alive "$process"
    ((SECONDS < deadline)) || fail "$what: not within ${wait_seconds} s"
    sleep 1
  done
  say "ok: $what (${SECONDS}s in, $((SECONDS - start)) s)"
}

web_ready() { [ "$(http_status "http://127.0.0.1:$port/readyz")" = 200 ]; }
console_page() { [ "$(http_status "http://127.0.0.1:$port/admin/login/")" = 200 ]; }
worker_pong() {
  (cd "$src" && "${run_env[@]}" celery -A config inspect ping --timeout 3 >/dev/null 2>&1)
}
beat_task_ran() {
  grep -q 'Sending due task expire-due-breakpoints' "$logs/beat.log" &&
    grep -Eq 'Task breakpoints\.tasks\.expire_due_breakpoints\[[^]]+\] succeeded' \
      "$logs/worker.log"
}

mkdir -p "$src" "$logs"
# The working tree's files (tracked, and new ones not ignored): no build/, var/ or
# node_modules of the checkout, and the build leaves nothing behind in it.
(cd "$repo" && git ls-files -z --cached --others --exclude-standard |
  while IFS= read -r -d '' path; do [ -e "$path" ] && printf '%s\0' "$path"; done |
  tar --null -T - -cf -) | tar -xf - -C "$src"

say "installing the project without extras into a throwaway venv ($venv)"
python3 -m venv "$venv"
(cd "$work" && env -u PYTHONPATH "$venv/bin/pip" install --quiet "$src") >"$logs/pip.log" 2>&1 ||
  fail "pip install . (without extras) failed"
if "$venv/bin/python" -c 'import pytest' 2>/dev/null; then
  fail "pytest is installed: this venv has dev extras"
fi

say "release: create the database when missing, then the Procfile's release line"
(cd "$src" && "${run_env[@]}" python -m devtools.database) || fail "the database cannot be used"
release=$(sed -n 's/^release: //p' "$src/Procfile")
(cd "$src" && "${run_env[@]}" bash -c "$release") >"$logs/release.log" 2>&1 ||
  fail "release: $release"
say "ok: release"

start web
start worker
start beat
wait_for "web answers /readyz 200" web web_ready
wait_for "web serves the console's login page" web console_page
wait_for "worker answers celery inspect ping" worker worker_pong
wait_for "beat sent its sweep and the worker ran it" beat beat_task_ran
for name in web worker beat; do alive "$name"; done

say "stopping web, worker and beat"; stop_start=$SECONDS
stop_all
say "stopped in $((SECONDS - stop_start)) s; passed: web, worker and beat ran from a non-dev install"

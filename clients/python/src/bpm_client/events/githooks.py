"""Git hooks that send git.post-commit, git.post-merge and git.pre-push events.

Each hook is a POSIX shell script that runs
`<python> -m bpm_client events send <source> git.<hook> --data '{"ref", "sha", "branch", "repo"}'`
(the absolute path of the interpreter that installed it, which has this package) in the
background, with a time limit, its output appended to .git/bpm-hooks.log: it never blocks
nor fails the git command. The secret is read from an environment variable when the hook
runs; no hook file holds it.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from ..config import URL_VARIABLE
from .sending import (
    DEFAULT_TIMEOUT,
    SECRET_ENV,
    SOURCE_NAME,
    SendError,
    check_timeout,
    resolve_url,
)

HOOKS = ("post-commit", "post-merge", "pre-push")
MARKER = "bpm-install-git-hooks"  # in every hook this writes; others are not overwritten
ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
SEND_LIMIT_SECONDS = 60  # the whole background send, the interpreter's start-up included
MAX_TIMEOUT = 60.0  # each send's HTTP timeout: within the limit above

# Builds the --data JSON (every value escaped as JSON must be); branch from refs/heads/*.
DATA_SCRIPT = """import json, sys
ref, sha, repo, hook, remote = sys.argv[1:6]
data = {"ref": ref, "sha": sha, "repo": repo, "hook": hook}
if ref.startswith("refs/heads/"):
    data["branch"] = ref[len("refs/heads/"):]
if remote:
    data["remote"] = remote
print(json.dumps(data))"""

HEADER = """#!/bin/sh
# {marker}: sends git.{hook} events to Breakpoint Manager (source {source_text}).
# Written by `bpm events hooks install`; run it again to change it. The secret is read
# from ${secret_env} when the hook runs and is never written here. The event is sent in
# the background (output in .git/bpm-hooks.log): the git command is never blocked nor
# failed by it.
bpm_python={python}
bpm_source={source}
bpm_hook={hook}
bpm_url={url}
bpm_timeout={timeout}
{secret}
bpm_log="$(git rev-parse --git-dir 2>/dev/null || echo .)/bpm-hooks.log"
bpm_repo="$(git rev-parse --show-toplevel 2>/dev/null || pwd)"
bpm_limit=
if command -v timeout >/dev/null 2>&1; then bpm_limit="timeout {limit}"; fi

bpm_send() {{  # ref sha [remote]
    bpm_data=$("$bpm_python" -c {data_script} \\
        "$1" "$2" "$bpm_repo" "$bpm_hook" "${{3:-}}" </dev/null) || return 0
    set -- events send "$bpm_source" "git.$bpm_hook" --data "$bpm_data" --timeout "$bpm_timeout"
    if [ -n "$bpm_url" ]; then set -- --url "$bpm_url" "$@"; fi
    $bpm_limit "$bpm_python" -m bpm_client "$@" </dev/null
}}
"""

AFTER_HEAD_MOVED = """
bpm_ref=$(git symbolic-ref -q HEAD 2>/dev/null || echo HEAD)
bpm_sha=$(git rev-parse -q --verify HEAD 2>/dev/null) || exit 0
( bpm_send "$bpm_ref" "$bpm_sha" ) </dev/null >>"$bpm_log" 2>&1 &
exit 0
"""

# pre-push reads "<local ref> <local sha> <remote ref> <remote sha>" lines on stdin; one
# event per pushed ref (deletions, an all-zero local sha, are skipped).
BEFORE_PUSH = """
bpm_remote=${1:-}
bpm_pushed=
while read -r bpm_local_ref bpm_local_sha bpm_remote_ref bpm_remote_sha; do
    case $bpm_local_sha in *[!0]*) ;; *) continue ;; esac
    bpm_pushed="$bpm_pushed$bpm_local_ref $bpm_local_sha
"
done
(
    printf '%s' "$bpm_pushed" | while read -r bpm_ref bpm_sha; do
        bpm_send "$bpm_ref" "$bpm_sha" "$bpm_remote"
    done
) </dev/null >>"$bpm_log" 2>&1 &
exit 0
"""


class HookError(SendError):
    """Why the hooks were not installed, in one line."""


@dataclass(frozen=True)
class Installed:
    path: Path
    backup: Path | None  # where a hook this did not write was moved (--force)


def hooks_dir(repo: Path) -> Path:
    """The repository's hooks folder as git sees it (core.hooksPath, worktrees)."""
    if not repo.is_dir():
        raise HookError(f"{repo} is not a directory.")
    try:
        result = subprocess.run(
            ["git", "-C", str(repo), "rev-parse", "--git-path", "hooks"],
            capture_output=True,
            text=True,
            timeout=30,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        raise HookError(f"Cannot run git: {exc}") from None
    if result.returncode != 0:
        raise HookError(f"{repo} is not a git repository.")
    return repo / result.stdout.strip()


def render_hook(hook: str, *, source: str, url: str | None, secret_env: str, timeout: float) -> str:
    """The script of one hook (sh), every value quoted for the shell."""
    secret = ""
    if secret_env != SECRET_ENV:
        secret = (
            f'if [ -n "${{{secret_env}:-}}" ]; then '
            f"{SECRET_ENV}=${secret_env}; export {SECRET_ENV}; fi"
        )
    header = HEADER.format(
        marker=MARKER,
        hook=hook,
        source_text=source,
        secret_env=secret_env,
        python=shlex.quote(sys.executable),
        source=shlex.quote(source),
        url=shlex.quote(url or ""),
        timeout=shlex.quote(f"{timeout:g}"),
        secret=secret,
        limit=SEND_LIMIT_SECONDS,
        data_script=shlex.quote(DATA_SCRIPT),
    )
    return header + (BEFORE_PUSH if hook == "pre-push" else AFTER_HEAD_MOVED)


def is_ours(path: Path) -> bool:
    try:
        return MARKER.encode() in path.read_bytes()[:512]
    except OSError:
        return False


def install(
    repo: Path,
    *,
    source: str,
    url: str | None = None,
    secret_env: str = SECRET_ENV,
    force: bool = False,
    timeout: float = DEFAULT_TIMEOUT,
) -> list[Installed]:
    """Write the three hooks; refuse (before writing any) to replace one it did not write,
    unless force (then that one is kept beside it as <hook>.before-bpm). `url`: written into
    the hooks; None: $BPM_URL (or the default) when a hook runs."""
    check_timeout(timeout, MAX_TIMEOUT)
    url = resolve_url(url) if url else None
    if not SOURCE_NAME.match(source):
        raise HookError(f"--source must be an event source's name (a slug), not {source!r}.")
    if not ENV_NAME.match(secret_env):
        raise HookError(f"--secret-env must be an environment variable's name, not {secret_env!r}.")
    folder = hooks_dir(repo)
    foreign = [name for name in HOOKS if (folder / name).exists() and not is_ours(folder / name)]
    if foreign and not force:
        raise HookError(
            f"{', '.join(foreign)} in {folder} were not written by `bpm events hooks install`; "
            "use --force to replace them (each is kept as <hook>.before-bpm)."
        )
    folder.mkdir(parents=True, exist_ok=True)
    installed = []
    for name in HOOKS:
        path = folder / name
        backup = _backup(path) if name in foreign else None
        script = render_hook(name, source=source, url=url, secret_env=secret_env, timeout=timeout)
        _write_executable(path, script)
        installed.append(Installed(path, backup))
    return installed


def report(
    installed: list[Installed], *, source: str, url: str | None, secret_env: str
) -> list[str]:
    """What was written, and what a hook needs when it runs, one line each."""
    lines = []
    for hook in installed:
        kept = f" (the previous hook kept as {hook.backup.name})" if hook.backup else ""
        lines.append(f"Installed {hook.path}{kept}")
    target = url or f"${URL_VARIABLE} or the default URL"
    lines.append(
        f"Each sends git.<hook> events from source {source!r} to {target}; "
        f"set ${secret_env} to the source's secret where git runs."
    )
    return lines


def _backup(path: Path) -> Path:
    backup = path.with_name(path.name + ".before-bpm")
    if backup.exists():  # never lose an earlier original
        backup = path.with_name(f"{path.name}.before-bpm.{int(time.time())}")
    path.replace(backup)
    return backup


def _write_executable(path: Path, text: str) -> None:
    partial = path.with_name(f".{path.name}.bpm-partial")
    partial.write_text(text, encoding="utf-8")
    os.chmod(partial, 0o755)
    partial.replace(path)

"""The local senders against a live server: `bpm events send`, the git hooks `bpm events
hooks install` writes, `bpm events watch`; and the management commands send_event,
install_git_hooks and watch_path, their deprecated aliases for one release.

pytest-django's live_server (a real HTTP server on this machine, in a thread) receives what
they send from subprocesses, as they would run for a person: the secret in
$BPM_EVENT_SECRET, a real `git` in a temporary repository. `bpm` and the hooks run where
only the agent client can be imported: a sitecustomize refuses Django and every server
package, so a sender that needed the server would fail here.
"""

import hashlib
import json
import os
import queue
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from io import StringIO
from pathlib import Path
from typing import IO, Any

import pytest
from bpm_client.events.githooks import HOOKS, MARKER
from django.core.management import call_command

from tests.support.net import free_port
from tests.support.project import APP_PACKAGES, ROOT
from triggers.models import EventSource, ExternalEvent

BPM = str(Path(sys.executable).parent / "bpm")
CLIENT_SOURCES = ROOT / "clients" / "python" / "src"
SECRET = "local-sender-secret-0123456789abcdef"
DEADLINE = 40.0
DEPRECATED = "Deprecated: manage.py {name} is now `{replacement}` (the bpm-client package)"

# Makes every import of Django or a server package fail in the process that loads it.
CLIENT_ONLY = f"""import sys

REFUSED = {sorted({"django", "rest_framework", *APP_PACKAGES})!r}


class RefuseTheServer:
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in REFUSED:
            raise ModuleNotFoundError(f"{{name}}: only the agent client here", name=name)
        return None


sys.meta_path.insert(0, RefuseTheServer())
"""


@pytest.fixture
def sources(transactional_db) -> None:
    """Two generic-hmac sources, committed: the live server's thread sees them."""
    for name in ("git", "files"):
        EventSource.objects.create(name=name, kind="generic-hmac", secret=SECRET)


@pytest.fixture(scope="module")
def client_only(tmp_path_factory) -> str:
    """A PYTHONPATH with the agent client and the sitecustomize above, nothing else."""
    folder = tmp_path_factory.mktemp("client-only")
    (folder / "sitecustomize.py").write_text(CLIENT_ONLY)
    return os.pathsep.join([str(folder), str(CLIENT_SOURCES)])


def sender_env(pythonpath: str | None = None, **extra: str) -> dict[str, str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("BPM_")}
    if pythonpath is not None:
        base["PYTHONPATH"] = pythonpath
    return {**base, "PYTHONUNBUFFERED": "1", **extra}


def run(command: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=60)


def messages(stderr: str) -> list[str]:
    """stderr without the JSON log lines Django's start-up may write."""
    return [line for line in stderr.splitlines() if line.strip() and not _is_log(line)]


def _is_log(line: str) -> bool:
    try:
        return "logger" in json.loads(line)
    except ValueError:
        return False


def poll(find: Callable[[], Any], what: str, timeout: float = DEADLINE) -> Any:
    deadline = time.monotonic() + timeout
    while (found := find()) in (None, [], False):
        if time.monotonic() > deadline:
            pytest.fail(f"Timed out after {timeout}s waiting for {what}")
        time.sleep(0.1)
    return found


def events(**filters) -> list[ExternalEvent]:
    return list(ExternalEvent.objects.filter(**filters).order_by("received_at"))


def test_the_client_only_path_refuses_the_server(client_only):
    """The guard the senders run behind works: Django cannot be imported there."""
    result = run([sys.executable, "-c", "import django"], sender_env(client_only))
    assert result.returncode != 0 and "only the agent client here" in result.stderr


# --- bpm events send -----------------------------------------------------------------------


def test_send_posts_a_signed_event_once_per_delivery_id(
    live_server, sources, tmp_path, client_only
):
    data_file = tmp_path / "data.json"
    data_file.write_text(json.dumps({"env": "prod", "ok": True}))
    env = sender_env(client_only, BPM_URL=live_server.url, BPM_EVENT_SECRET=SECRET)
    command = [BPM, "events", "send", "git", "deploy.done", "--data", f"@{data_file}"]
    command += ["--id", "d-1", "--json"]

    first, again = run(command, env), run(command, env)

    assert first.returncode == 0, first.stderr
    answer = json.loads(first.stdout)
    assert answer["duplicate"] is False
    assert json.loads(again.stdout) == {"eventId": answer["eventId"], "duplicate": True}
    (event,) = events()
    assert (event.pk, event.type, event.delivery_id) == (answer["eventId"], "deploy.done", "d-1")
    assert event.payload == {"env": "prod", "ok": True}
    assert event.source.name == "git"


SEND_FAILURES = {
    "unreachable": (["--url", "http://127.0.0.1:PORT"], ["git", "t"], "Cannot reach"),
    "wrong secret": (
        [],
        ["git", "t", "--secret", "not-the-secret-0123456789"],
        "refused the signature",
    ),
    "unknown source": ([], ["nope", "t"], "no enabled event source named 'nope'"),
}


@pytest.mark.parametrize("case", SEND_FAILURES, ids=list(SEND_FAILURES))
def test_send_failures_are_one_line_and_a_nonzero_exit(live_server, sources, client_only, case):
    before, after, expected = SEND_FAILURES[case]
    before = [arg.replace("PORT", str(free_port())) for arg in before]
    env = sender_env(client_only, BPM_URL=live_server.url, BPM_EVENT_SECRET=SECRET)

    result = run([BPM, *before, "events", "send", *after], env)

    assert result.returncode == 4
    (line,) = result.stderr.splitlines()
    assert line.startswith("bpm: error: ") and expected in line, line
    assert not ExternalEvent.objects.exists()


# --- git hooks -----------------------------------------------------------------------------


def git(repo: Path, *args: str, env: dict[str, str]) -> str:
    result = subprocess.run(
        ["git", "-C", str(repo), *args], env=env, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, f"git {' '.join(args)}: {result.stderr}"
    return result.stdout.strip()


def git_env(client_only: str, **extra: str) -> dict[str, str]:
    """Nothing from the machine's git configuration (no global hooks, no signing)."""
    return sender_env(client_only, GIT_CONFIG_GLOBAL=os.devnull, GIT_CONFIG_NOSYSTEM="1", **extra)


@pytest.fixture
def repo(tmp_path, client_only) -> Path:
    path = tmp_path / "work tree"  # a space: the hooks quote what they pass
    path.mkdir()
    env = git_env(client_only)
    git(path, "init", "-q", "-b", "main", env=env)
    git(path, "config", "user.name", "Test Author", env=env)
    git(path, "config", "user.email", "author@example.com", env=env)
    git(path, "config", "commit.gpgsign", "false", env=env)
    return path


def commit(repo: Path, name: str, text: str, env: dict[str, str]) -> str:
    (repo / name).write_text(text)
    git(repo, "add", name, env=env)
    git(repo, "commit", "-q", "-m", f"change {name}", env=env)
    return git(repo, "rev-parse", "HEAD", env=env)


def install(repo: Path, *args: str, url: str | None, client_only: str) -> str:
    """`bpm [--url URL] events hooks install REPO ARGS`, as a person runs it."""
    given = ["--url", url] if url else []
    command = [BPM, *given, "events", "hooks", "install", str(repo), *args]
    result = run(command, sender_env(client_only))
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_git_commit_push_and_merge_each_send_their_event(
    live_server, sources, repo, tmp_path, client_only
):
    install(repo, "--source", "git", url=live_server.url, client_only=client_only)
    hooks = repo / ".git" / "hooks"
    for name in HOOKS:
        text = (hooks / name).read_text()
        assert MARKER in text and SECRET not in text
        assert os.access(hooks / name, os.X_OK)
    env = git_env(client_only, BPM_EVENT_SECRET=SECRET)
    where = str(repo.resolve())

    sha = commit(repo, "a.txt", "one", env)
    (event,) = poll(lambda: events(type="git.post-commit"), "the post-commit event")
    assert event.payload == {
        "ref": "refs/heads/main",
        "sha": sha,
        "branch": "main",
        "repo": where,
        "hook": "post-commit",
    }

    remote = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", str(remote), env=env)
    git(repo, "push", "-q", str(remote), "main", env=env)
    (pushed,) = poll(lambda: events(type="git.pre-push"), "the pre-push event")
    assert (pushed.payload["sha"], pushed.payload["branch"]) == (sha, "main")
    assert pushed.payload["remote"] == str(remote)

    git(repo, "checkout", "-q", "-b", "feature", env=env)
    feature_sha = commit(repo, "b.txt", "two", env)
    git(repo, "checkout", "-q", "main", env=env)
    git(repo, "merge", "-q", "--ff-only", "feature", env=env)
    (merged,) = poll(lambda: events(type="git.post-merge"), "the post-merge event")
    assert (merged.payload["sha"], merged.payload["branch"]) == (feature_sha, "main")
    commits = poll(lambda: len(events(type="git.post-commit")) == 2 and events(), "2 commits")
    assert len({event.delivery_id for event in commits}) == len(commits) == 4


@pytest.fixture
def silent_server() -> Iterator[str]:
    """A port that accepts connections and never answers (a hung service)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(16)
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"


def test_the_hooks_never_block_nor_fail_git(repo, tmp_path, silent_server, client_only):
    install(repo, "--timeout", "6", url=silent_server, client_only=client_only)
    env = git_env(client_only, BPM_EVENT_SECRET=SECRET)

    started = time.monotonic()
    commit(repo, "a.txt", "one", env)
    git(tmp_path, "init", "-q", "--bare", str(tmp_path / "remote.git"), env=env)
    git(repo, "push", "-q", str(tmp_path / "remote.git"), "main", env=env)
    elapsed = time.monotonic() - started

    assert elapsed < 5, f"git waited {elapsed:.1f}s for its hooks"
    log = repo / ".git" / "bpm-hooks.log"
    poll(
        lambda: log.exists() and log.read_text().count("did not answer within 6 s") == 2,
        "both hooks to give up on the silent server",
    )


def test_a_secret_env_other_than_the_default_is_read_at_run_time(
    live_server, sources, repo, client_only
):
    install(repo, "--secret-env", "MY_HOOK_SECRET", url=live_server.url, client_only=client_only)
    assert SECRET not in (repo / ".git" / "hooks" / "post-commit").read_text()
    sha = commit(repo, "a.txt", "one", git_env(client_only, MY_HOOK_SECRET=SECRET))
    (event,) = poll(lambda: events(type="git.post-commit"), "the post-commit event")
    assert event.payload["sha"] == sha


def test_the_hooks_read_bpm_url_when_they_run(live_server, sources, repo, client_only):
    install(repo, url=None, client_only=client_only)
    env = git_env(client_only, BPM_EVENT_SECRET=SECRET, BPM_URL=live_server.url)
    sha = commit(repo, "a.txt", "one", env)
    (event,) = poll(lambda: events(type="git.post-commit"), "the post-commit event")
    assert event.payload["sha"] == sha


# --- bpm events watch ----------------------------------------------------------------------


class Watcher:
    """A watcher in a subprocess, its output lines read as they come (stderr kept apart)."""

    def __init__(self, command: list[str], env: dict[str, str], stderr: IO[str]):
        self.process = subprocess.Popen(
            command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=stderr, text=True
        )
        self.lines: queue.Queue[str] = queue.Queue()
        self.seen: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.process.stdout:  # type: ignore[union-attr]
            self.lines.put(line.rstrip("\n"))

    def wait_for(self, needle: str, timeout: float = DEADLINE) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                line = self.lines.get(timeout=0.2)
            except queue.Empty:
                continue
            self.seen.append(line)
            if needle in line:
                return line
        pytest.fail(f"the watcher never said {needle!r}; it said:\n" + "\n".join(self.seen))

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(timeout=10)


@pytest.fixture
def watcher(live_server, sources, tmp_path) -> Iterator[Callable[..., Watcher]]:
    """watcher(command, env) -> a started Watcher that said it is watching; its stderr is
    in tmp_path/watcher-N.err."""
    started: list[Watcher] = []

    def start(command: list[str], env: dict[str, str]) -> Watcher:
        with open(tmp_path / f"watcher-{len(started)}.err", "w") as stderr:
            started.append(Watcher(command, env, stderr))
        started[-1].wait_for("Watching ")
        return started[-1]

    yield start
    for each in started:
        each.stop()


def test_watch_once_turns_two_quick_writes_into_one_event(
    watcher, live_server, tmp_path, client_only
):
    folder = tmp_path / "watched"
    folder.mkdir()
    env = sender_env(client_only, BPM_URL=live_server.url, BPM_EVENT_SECRET=SECRET)
    command = [BPM, "events", "watch", str(folder), "--source", "files", "--debounce", "1"]
    watch = watcher([*command, "--once"], env)

    report = folder / "report.txt"
    report.write_bytes(b"first draft")
    time.sleep(0.2)
    report.write_bytes(b"the final version")

    assert watch.process.wait(timeout=DEADLINE) == 0
    (event,) = events()
    assert event.type == "file.created"
    assert event.payload == {
        "path": str(report.resolve()),
        "sha256": hashlib.sha256(b"the final version").hexdigest(),
        "size": len(b"the final version"),
    }


def test_watch_sends_modified_and_deleted_and_ignores_scratch_files(
    watcher, live_server, tmp_path, client_only
):
    folder = tmp_path / "watched"
    (folder / "sub").mkdir(parents=True)
    existing = folder / "sub" / "notes.md"
    existing.write_text("v1")
    env = sender_env(client_only, BPM_URL=live_server.url)
    command = [BPM, "events", "watch", str(folder), "--source", "files", "--debounce", "0.5"]
    watch = watcher([*command, "--secret", SECRET], env)

    for scratch in (".notes.md.swp", "notes.md~", ".#notes.md", "4913"):
        (folder / "sub" / scratch).write_text("scratch")
    (folder / "new-dir").mkdir()
    existing.write_text("v2")
    existing.write_text("v3")
    watch.wait_for("file.modified")
    time.sleep(1.5)  # more than the window: nothing else may come
    (modified,) = events()
    assert modified.type == "file.modified"
    assert modified.payload["sha256"] == hashlib.sha256(b"v3").hexdigest()

    existing.unlink()
    watch.wait_for("file.deleted")
    deleted = events()[-1]
    assert (deleted.type, deleted.payload) == ("file.deleted", {"path": str(existing.resolve())})

    watch.process.send_signal(signal.SIGTERM)
    assert watch.process.wait(timeout=15) == 0
    watch.wait_for("Stopped")
    assert len(events()) == 2


def test_watch_says_which_sends_failed_and_carries_on(watcher, tmp_path, client_only):
    folder = tmp_path / "watched"
    folder.mkdir()
    env = sender_env(client_only, BPM_URL=f"http://127.0.0.1:{free_port()}")
    command = [BPM, "events", "watch", str(folder), "--source", "files", "--debounce", "0.2"]
    watch = watcher([*command, "--secret", SECRET], env)

    (folder / "a.txt").write_text("a")
    poll(lambda: "not sent" in (tmp_path / "watcher-0.err").read_text(), "the failed send")
    assert watch.process.poll() is None  # still watching
    (line,) = (tmp_path / "watcher-0.err").read_text().splitlines()
    assert line.startswith(f"bpm: warning: file.created {(folder / 'a.txt').resolve()} not sent: ")
    assert "Cannot reach" in line


# --- the deprecated management commands, aliases for one release ---------------------------


def test_send_event_still_sends_with_the_secret_from_the_database(live_server, sources):
    out, err = StringIO(), StringIO()
    call_command(
        "send_event", "git", "ping", "--url", live_server.url, "--json", stdout=out, stderr=err
    )
    (event,) = events()
    assert event.type == "ping"
    assert json.loads(out.getvalue()) == {"eventId": event.pk, "duplicate": False}
    assert err.getvalue().startswith(
        DEPRECATED.format(name="send_event", replacement="bpm events send")
    )


def test_send_event_failures_are_still_one_commanderror_line(live_server, sources):
    env = sender_env(BPM_URL=live_server.url, BPM_EVENT_SECRET=SECRET)
    command = [sys.executable, "manage.py", "send_event", "nope", "t"]
    result = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)

    assert result.returncode == 1 and "Traceback" not in result.stderr
    note, line = messages(result.stderr)
    assert note.startswith(DEPRECATED.format(name="send_event", replacement="bpm events send"))
    assert line == "CommandError: The service has no enabled event source named 'nope' (404)."


def test_install_git_hooks_still_writes_hooks_that_send(live_server, sources, repo, client_only):
    out, err = StringIO(), StringIO()
    call_command("install_git_hooks", str(repo), "--url", live_server.url, stdout=out, stderr=err)
    assert err.getvalue().startswith(
        DEPRECATED.format(name="install_git_hooks", replacement="bpm events hooks install")
    )
    assert out.getvalue().splitlines()[0] == f"Installed {repo / '.git' / 'hooks' / HOOKS[0]}"
    sha = commit(repo, "a.txt", "one", git_env(client_only, BPM_EVENT_SECRET=SECRET))
    (event,) = poll(lambda: events(type="git.post-commit"), "the post-commit event")
    assert event.payload["sha"] == sha


def test_watch_path_still_watches(watcher, live_server, tmp_path):
    folder = tmp_path / "watched"
    folder.mkdir()
    env = sender_env(BPM_URL=live_server.url, BPM_EVENT_SECRET=SECRET)
    command = [sys.executable, "manage.py", "watch_path", str(folder), "--source", "files"]
    watch = watcher([*command, "--debounce", "0.2", "--once"], env)

    (folder / "a.txt").write_text("a")

    assert watch.process.wait(timeout=DEADLINE) == 0
    (event,) = events()
    assert (event.type, event.payload["path"]) == (
        "file.created",
        str((folder / "a.txt").resolve()),
    )
    note, *_ = messages((tmp_path / "watcher-0.err").read_text())
    assert note.startswith(DEPRECATED.format(name="watch_path", replacement="bpm events watch"))

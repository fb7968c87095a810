"""The local senders against a live server: send_event, the git hooks, watch_path.

pytest-django's live_server (a real HTTP server on this machine, in a thread) receives
what the commands send from subprocesses, as they would run for a person: `manage.py` in
this virtualenv, the secret in $BPM_EVENT_SECRET, a real `git` in a temporary repository.
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
from typing import Any

import pytest
from django.core.management import CommandError, call_command

from tests.support.net import free_port
from triggers.management.githooks import HOOKS, MARKER
from triggers.management.watching import Debouncer, change_of, is_temporary
from triggers.models import EventSource, ExternalEvent

PROJECT_DIR = Path(__file__).resolve().parents[3]
SECRET = "local-sender-secret-0123456789abcdef"
DEADLINE = 40.0


@pytest.fixture
def sources(transactional_db) -> None:
    """Two generic-hmac sources, committed: the live server's thread sees them."""
    for name in ("git", "files"):
        EventSource.objects.create(name=name, kind="generic-hmac", secret=SECRET)


def sender_env(**extra: str) -> dict[str, str]:
    base = {k: v for k, v in os.environ.items() if k not in ("BPM_URL", "BPM_EVENT_SECRET")}
    return {**base, "PYTHONUNBUFFERED": "1", **extra}


def manage(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=PROJECT_DIR,
        env=env or sender_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )


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


# --- send_event ----------------------------------------------------------------------------


def test_send_event_posts_a_signed_event_once_per_delivery_id(live_server, sources, tmp_path):
    data_file = tmp_path / "data.json"
    data_file.write_text(json.dumps({"env": "prod", "ok": True}))
    env = sender_env(BPM_URL=live_server.url, BPM_EVENT_SECRET=SECRET)
    args = ("send_event", "git", "deploy.done", "--data", f"@{data_file}", "--id", "d-1", "--json")

    first, again = manage(*args, env=env), manage(*args, env=env)

    assert first.returncode == 0, first.stderr
    answer = json.loads(first.stdout)
    assert answer["duplicate"] is False
    assert json.loads(again.stdout) == {"eventId": answer["eventId"], "duplicate": True}
    (event,) = events()
    assert (event.pk, event.type, event.delivery_id) == (answer["eventId"], "deploy.done", "d-1")
    assert event.payload == {"env": "prod", "ok": True}
    assert event.source.name == "git"


def test_send_event_takes_the_secret_from_the_database_when_none_is_given(live_server, sources):
    call_command("send_event", "git", "ping", "--url", live_server.url, stdout=StringIO())
    assert [event.type for event in events()] == ["ping"]


SEND_FAILURES = {
    "unreachable": (["git", "t", "--url", "http://127.0.0.1:PORT"], "Cannot reach"),
    "wrong secret": (
        ["git", "t", "--secret", "not-the-secret-0123456789"],
        "refused the signature",
    ),
    "unknown source": (["nope", "t"], "no enabled event source named 'nope'"),
    "bad json": (["git", "t", "--data", "{nope"], "--data is not valid JSON"),
    "missing file": (["git", "t", "--data", "@/nonexistent/event.json"], "file not found"),
}


@pytest.mark.parametrize("case", SEND_FAILURES, ids=list(SEND_FAILURES))
def test_send_event_failures_are_one_line_and_a_nonzero_exit(live_server, sources, case):
    args, expected = SEND_FAILURES[case]
    args = [arg.replace("PORT", str(free_port())) for arg in args]
    result = manage(
        "send_event", *args, env=sender_env(BPM_URL=live_server.url, BPM_EVENT_SECRET=SECRET)
    )
    assert result.returncode != 0
    assert "Traceback" not in result.stderr
    (line,) = messages(result.stderr)
    assert line.startswith("CommandError: ") and expected in line, line
    assert not ExternalEvent.objects.exists()


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (("git", "t", "--data", "[1, 2]"), "--data must be a JSON object"),
        (("git", "t", "--data", '{"a": NaN}'), "--data is not valid JSON: NaN"),
        (("git", " "), "The event type must be"),
        (("git", "t", "--id", "x" * 201), "The event id must be"),
        (("git", "t", "--timeout", "0"), "--timeout"),
        (("git", "t", "--url", "file:///etc/passwd"), r"http\(s\)"),
    ],
)
def test_send_event_refuses_bad_arguments_before_sending(db, monkeypatch, args, expected):
    monkeypatch.setenv("BPM_URL", "http://127.0.0.1:9")  # nothing listens: never reached
    monkeypatch.setenv("BPM_EVENT_SECRET", SECRET)
    with pytest.raises(CommandError, match=expected):
        call_command("send_event", *args)


def test_send_event_without_any_secret_says_where_to_put_it(live_server, transactional_db):
    result = manage("send_event", "no-such-source", "t", env=sender_env(BPM_URL=live_server.url))
    assert result.returncode != 0 and "Traceback" not in result.stderr
    (line,) = messages(result.stderr)
    assert "No secret for source 'no-such-source'" in line and "BPM_EVENT_SECRET" in line


# --- git hooks -----------------------------------------------------------------------------


def git(repo: Path, *args: str, env: dict[str, str] | None = None) -> str:
    result = subprocess.run(
        ["git", "-C", str(repo), *args],
        env=env or git_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, f"git {' '.join(args)}: {result.stderr}"
    return result.stdout.strip()


def git_env(**extra: str) -> dict[str, str]:
    """Nothing from the machine's git configuration (no global hooks, no signing)."""
    return sender_env(GIT_CONFIG_GLOBAL=os.devnull, GIT_CONFIG_NOSYSTEM="1", **extra)


@pytest.fixture
def repo(tmp_path) -> Path:
    path = tmp_path / "work tree"  # a space: the hooks quote what they pass
    path.mkdir()
    git(path, "init", "-q", "-b", "main")
    git(path, "config", "user.name", "Test Author")
    git(path, "config", "user.email", "author@example.com")
    git(path, "config", "commit.gpgsign", "false")
    return path


def commit(repo: Path, name: str, text: str, env: dict[str, str]) -> str:
    (repo / name).write_text(text)
    git(repo, "add", name, env=env)
    git(repo, "commit", "-q", "-m", f"change {name}", env=env)
    return git(repo, "rev-parse", "HEAD")


def install(repo: Path, *args: str) -> str:
    out = StringIO()
    call_command("install_git_hooks", str(repo), *args, stdout=out)
    return out.getvalue()


def test_git_commit_push_and_merge_each_send_their_event(live_server, sources, repo, tmp_path):
    install(repo, "--source", "git", "--url", live_server.url)
    hooks = repo / ".git" / "hooks"
    for name in HOOKS:
        text = (hooks / name).read_text()
        assert MARKER in text and SECRET not in text
        assert os.access(hooks / name, os.X_OK)
    env = git_env(BPM_EVENT_SECRET=SECRET)
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
    git(tmp_path, "init", "-q", "--bare", str(remote))
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


def test_the_hooks_never_block_nor_fail_git(repo, tmp_path, silent_server):
    install(repo, "--url", silent_server, "--timeout", "6")
    env = git_env(BPM_EVENT_SECRET=SECRET)

    started = time.monotonic()
    commit(repo, "a.txt", "one", env)
    git(tmp_path, "init", "-q", "--bare", str(tmp_path / "remote.git"))
    git(repo, "push", "-q", str(tmp_path / "remote.git"), "main", env=env)
    elapsed = time.monotonic() - started

    assert elapsed < 5, f"git waited {elapsed:.1f}s for its hooks"
    log = repo / ".git" / "bpm-hooks.log"
    poll(
        lambda: log.exists() and log.read_text().count("did not answer within 6 s") == 2,
        "both hooks to give up on the silent server",
    )


def test_install_refuses_to_replace_a_hook_it_did_not_write(repo):
    hooks = repo / ".git" / "hooks"
    hooks.mkdir(exist_ok=True)
    (hooks / "post-merge").write_text("#!/bin/sh\necho mine\n")

    with pytest.raises(CommandError, match=r"post-merge .*--force"):
        install(repo)
    assert not (hooks / "post-commit").exists()  # nothing written at all

    output = install(repo, "--force")
    assert "post-merge.before-bpm" in output
    assert (hooks / "post-merge.before-bpm").read_text() == "#!/bin/sh\necho mine\n"
    assert MARKER in (hooks / "post-merge").read_text()
    install(repo, "--source", "other")  # its own hooks: rewritten without --force
    assert "bpm_source=other" in (hooks / "post-commit").read_text()


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (("--secret-env", "NOT-A-NAME"), "--secret-env"),
        (("--source", "Bad Name"), "--source"),
        (("--url", "ftp://host"), r"http\(s\)"),
    ],
)
def test_install_refuses_bad_options(repo, args, expected):
    with pytest.raises(CommandError, match=expected):
        install(repo, *args)


def test_install_refuses_what_is_not_a_repository(tmp_path):
    with pytest.raises(CommandError, match="not a git repository"):
        install(tmp_path)


def test_a_secret_env_other_than_the_default_is_read_at_run_time(live_server, sources, repo):
    install(repo, "--url", live_server.url, "--secret-env", "MY_HOOK_SECRET")
    assert SECRET not in (repo / ".git" / "hooks" / "post-commit").read_text()
    sha = commit(repo, "a.txt", "one", git_env(MY_HOOK_SECRET=SECRET))
    (event,) = poll(lambda: events(type="git.post-commit"), "the post-commit event")
    assert event.payload["sha"] == sha


# --- watch_path ----------------------------------------------------------------------------


class Watcher:
    """watch_path in a subprocess, its output lines read as they come."""

    def __init__(self, *args: str, env: dict[str, str]):
        self.process = subprocess.Popen(
            [sys.executable, "manage.py", "watch_path", *args],
            cwd=PROJECT_DIR,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
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
        pytest.fail(f"watch_path never said {needle!r}; it said:\n" + "\n".join(self.seen))

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(timeout=10)


@pytest.fixture
def watcher(live_server, sources) -> Iterator[Callable[..., Watcher]]:
    started: list[Watcher] = []

    def start(*args: str) -> Watcher:
        env = sender_env(BPM_URL=live_server.url, BPM_EVENT_SECRET=SECRET)
        started.append(Watcher(*args, env=env))
        started[-1].wait_for("Watching ")
        return started[-1]

    yield start
    for each in started:
        each.stop()


def test_watch_path_once_turns_two_quick_writes_into_one_event(watcher, tmp_path):
    folder = tmp_path / "watched"
    folder.mkdir()
    watch = watcher(str(folder), "--source", "files", "--debounce", "1", "--once")

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


def test_watch_path_sends_modified_and_deleted_and_ignores_scratch_files(watcher, tmp_path):
    folder = tmp_path / "watched"
    (folder / "sub").mkdir(parents=True)
    existing = folder / "sub" / "notes.md"
    existing.write_text("v1")
    watch = watcher(str(folder), "--source", "files", "--debounce", "0.5")

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


def test_watch_path_refuses_a_missing_path(transactional_db, tmp_path):
    with pytest.raises(CommandError, match="does not exist"):
        call_command("watch_path", str(tmp_path / "nope"), "--source", "files")


# --- the debouncing, without a watcher -----------------------------------------------------


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_each_signal_restarts_its_paths_window():
    clock = FakeClock()
    debouncer = Debouncer(0.5, clock=clock)
    debouncer.signal("/w/a", existed=False)
    clock.now += 0.4
    debouncer.signal("/w/a", existed=True)  # the window's first signal decides "existed"
    debouncer.signal("/w/b", existed=True)
    clock.now += 0.4
    assert debouncer.due() == []  # 0.4 s since the last signal of each
    clock.now += 0.2
    assert debouncer.due() == [("/w/a", False), ("/w/b", True)]
    assert debouncer.due() == [] and len(debouncer) == 0


def test_a_window_ends_with_the_files_state(tmp_path):
    path = tmp_path / "f.txt"
    assert change_of(str(path), existed=False) is None  # created and deleted: no change
    assert change_of(str(path), existed=True) == ("file.deleted", {"path": str(path)})
    path.write_bytes(b"abc")
    digest = hashlib.sha256(b"abc").hexdigest()
    assert change_of(str(path), existed=False) == (
        "file.created",
        {"path": str(path), "sha256": digest, "size": 3},
    )
    replaced = change_of(str(path), existed=True)
    assert replaced is not None and replaced[0] == "file.modified"
    assert change_of(str(tmp_path), existed=True) is None  # a directory
    os.mkfifo(tmp_path / "pipe")
    assert change_of(str(tmp_path / "pipe"), existed=False) is None  # and it did not block


@pytest.mark.parametrize(
    ("path", "temporary"),
    [
        ("/w/.notes.md.swp", True),
        ("/w/notes.md~", True),
        ("/w/.#notes.md", True),
        ("/w/4913", True),
        ("/w/.git/index", True),
        ("/w/notes.md", False),
        ("/w/swp.md", False),
        ("/w/.gitignore", False),
    ],
)
def test_editor_scratch_files_are_ignored(path, temporary):
    assert is_temporary(path) is temporary

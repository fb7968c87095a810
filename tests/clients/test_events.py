"""`bpm events send|watch|hooks install` without a live system: what they refuse before
sending (one line, exit 4), what `send` puts on the wire (a real HTTP server that answers
from a script), the debouncing of `watch`, `hooks install`'s refusals, and `bpm events ID`
still being a breakpoint's history. tests/live/triggers/test_senders.py runs them against
the service; tests/triggers/test_client_signing.py shows the service verifies what they sign.
"""

import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from bpm_client.cli import main
from bpm_client.events.githooks import HOOKS, MARKER
from bpm_client.events.sending import signature
from bpm_client.events.watching import Debouncer, change_of, is_temporary

from tests.support.scripted import Answer

SECRET = "client-events-secret-0123456789abcdef"
REPO_ROOT = Path(__file__).resolve().parents[2]
NOTHING_LISTENS = "http://127.0.0.1:9"


@pytest.fixture(autouse=True)
def _no_bpm_environment(monkeypatch):
    for name in [name for name in os.environ if name.startswith("BPM_")]:
        monkeypatch.delenv(name)


def bpm(capsys, *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


# --- bpm events send -----------------------------------------------------------------------


def test_send_posts_a_signed_event_and_prints_the_answer(scripted, capsys, tmp_path):
    server = scripted(Answer(202, {"eventId": "evt_1", "duplicate": False}))
    data = tmp_path / "data.json"
    data.write_text('{"env": "prod", "ok": true}')

    code, out, err = bpm(
        capsys, "--url", server.url, "events", "send", "ci", "deploy.done",
        "--data", f"@{data}", "--secret", SECRET, "--id", "d-1",
    )  # fmt: skip

    assert (code, out, err) == (0, "Event evt_1 accepted.\n", "")
    (request,) = server.seen
    assert (request.method, request.path) == ("POST", "/api/events/ci")
    assert request.body == b'{"env":"prod","ok":true}'
    headers = request.headers
    assert (headers["x-bpm-event-id"], headers["x-bpm-event-type"]) == ("d-1", "deploy.done")
    assert abs(int(headers["x-bpm-timestamp"]) - time.time()) < 60
    expected = signature(SECRET, request.body, int(headers["x-bpm-timestamp"]))
    assert headers["x-bpm-signature"] == expected
    assert "authorization" not in headers  # signed with the source's secret, no API token


def test_send_takes_the_url_and_secret_from_the_environment_and_prints_json(
    scripted, capsys, monkeypatch
):
    server = scripted(Answer(200, {"eventId": "evt_1", "duplicate": True}))
    monkeypatch.setenv("BPM_URL", server.url)
    monkeypatch.setenv("BPM_EVENT_SECRET", SECRET)

    code, out, _ = bpm(capsys, "events", "send", "ci", "ping", "--json")

    assert code == 0 and json.loads(out) == {"eventId": "evt_1", "duplicate": True}
    (request,) = server.seen
    stamp = int(request.headers["x-bpm-timestamp"])
    assert request.headers["x-bpm-signature"] == signature(SECRET, b"{}", stamp)


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (("git", "t", "--data", "[1, 2]"), "--data must be a JSON object"),
        (("git", "t", "--data", '{"a": NaN}'), "--data is not valid JSON: NaN"),
        (("git", "t", "--data", "@/nonexistent/event.json"), "--data file not found"),
        (("git", " "), "The event type must be"),
        (("git", "t", "--id", "x" * 201), "The event id must be"),
        (("git", "t", "--timeout", "0"), "--timeout must be more than 0"),
    ],
)
def test_send_refuses_bad_arguments_before_sending(capsys, args, expected):
    code, out, err = bpm(
        capsys, "--url", NOTHING_LISTENS, "events", "send", *args, "--secret", SECRET
    )
    assert code == 4 and out == ""
    (line,) = err.splitlines()
    assert line.startswith("bpm: error: ") and expected in line, line


def test_send_refuses_a_url_that_is_not_http(capsys):
    code, _, err = bpm(capsys, "--url", "file:///etc/passwd", "events", "send", "git", "t")
    assert code == 4 and r"http(s)://host" in err


def test_send_without_a_secret_says_where_to_put_it(capsys):
    code, _, err = bpm(capsys, "--url", NOTHING_LISTENS, "events", "send", "ci", "t")
    assert code == 4
    assert err == (
        "bpm: error: No secret for source 'ci': pass --secret or set $BPM_EVENT_SECRET "
        "(the source's secret, shown when it was added).\n"
    )


def test_the_services_refusals_are_one_line(scripted, capsys):
    refused = {"error": {"code": "not_authenticated", "message": "The event's signature was "
                         "refused: X-Bpm-Signature does not match."}}  # fmt: skip
    server = scripted(Answer(401, refused))
    code, _, err = bpm(capsys, "--url", server.url, "events", "send", "ci", "t", "--secret", "x")
    assert code == 4
    assert err.startswith("bpm: error: The service refused the signature for source 'ci': ")
    assert "X-Bpm-Signature does not match. Check the secret" in err


# --- bpm events ID: the history, as before ----------------------------------------------------


@pytest.mark.parametrize(
    "args", [("bp_1",), ("bp_1", "--json"), ("--json", "bp_1"), ("history", "bp_1")]
)
def test_bpm_events_id_is_still_the_breakpoints_history(scripted, capsys, args):
    server = scripted(Answer(200, {"results": []}))
    code, _, err = bpm(capsys, "--url", server.url, "--token", "bpm_t", "events", *args)
    assert code == 0, err
    assert [request.path for request in server.seen] == ["/api/breakpoints/bp_1/events"]


def test_python_dash_m_bpm_client_is_bpm():
    """What the git hooks run: `<python> -m bpm_client`."""
    result = subprocess.run(
        [sys.executable, "-m", "bpm_client", "events", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert "Usage: bpm events" in result.stdout and "hooks" in result.stdout


# --- bpm events watch ----------------------------------------------------------------------


def test_watch_refuses_a_missing_path_and_a_bad_window(capsys, tmp_path):
    args = ("--url", NOTHING_LISTENS, "events", "watch")
    code, _, err = bpm(capsys, *args, str(tmp_path / "nope"), "--source", "f", "--secret", "s")
    assert code == 4 and err == f"bpm: error: {tmp_path / 'nope'} does not exist.\n"
    code, _, err = bpm(capsys, *args, str(tmp_path), "--source", "f", "--debounce", "0")
    assert code == 4 and "--debounce must be more than 0 and at most 60 seconds" in err


def test_watch_without_watchdog_says_how_to_install_it(capsys, tmp_path, monkeypatch):
    """The command hinted works in the environment running bpm (this test's: make run's
    `.venv` has no pip, uv made it): the same command with `show` finds bpm-client there.
    bpm-client is on no package index: the hint installs from the project's folder."""
    monkeypatch.setitem(sys.modules, "watchdog", None)  # as if it were not installed
    for name in [name for name in sys.modules if name.startswith("watchdog.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.delitem(sys.modules, "bpm_client.events.observing", raising=False)
    monkeypatch.chdir(REPO_ROOT)

    code, out, err = bpm(
        capsys, "--url", NOTHING_LISTENS, "events", "watch", str(tmp_path),
        "--source", "files", "--secret", SECRET,
    )  # fmt: skip

    assert code == 4 and out == ""
    prefix = "bpm: error: watching files needs watchdog, an optional extra: "
    suffix = " './clients/python[watch]' (in the project's folder)\n"
    assert err.startswith(prefix) and err.endswith(suffix), err
    installer, options = err.removeprefix(prefix).removesuffix(suffix).split(" install")
    assert options == "" or options.startswith(" --python "), err
    shown = subprocess.run(
        [*installer.split(), "show", *options.split(), "bpm-client"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert shown.returncode == 0, (err, shown.stderr)
    assert "Name: bpm-client" in shown.stdout


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


# --- bpm events hooks install --------------------------------------------------------------


@pytest.fixture
def repo(tmp_path):
    path = tmp_path / "work tree"
    path.mkdir()
    subprocess.run(["git", "init", "-q", str(path)], check=True, timeout=60)
    return path


def install(capsys, repo, *args: str, url: str | None = None) -> tuple[int, str, str]:
    """`bpm [--url URL] events hooks install REPO ARGS`."""
    given = ("--url", url) if url else ()
    return bpm(capsys, *given, "events", "hooks", "install", str(repo), *args)


def test_install_writes_three_hooks_that_run_this_client(capsys, repo):
    code, out, err = install(capsys, repo, "--source", "git", url="http://127.0.0.1:8000/")
    assert code == 0, err
    hooks = repo / ".git" / "hooks"
    assert out.splitlines() == [
        *(f"Installed {hooks / name}" for name in HOOKS),
        "Each sends git.<hook> events from source 'git' to http://127.0.0.1:8000; "
        "set $BPM_EVENT_SECRET to the source's secret where git runs.",
    ]
    for name in HOOKS:
        text = (hooks / name).read_text()
        assert MARKER in text and os.access(hooks / name, os.X_OK)
        assert f"bpm_python={sys.executable}" in text and "-m bpm_client" in text
        assert "bpm_url=http://127.0.0.1:8000\n" in text and "manage.py" not in text


def test_install_without_url_leaves_it_to_bpm_url_when_a_hook_runs(capsys, repo, monkeypatch):
    monkeypatch.setenv("BPM_URL", "http://127.0.0.1:8123")
    code, out, _ = install(capsys, repo)
    assert code == 0
    assert "bpm_url=''\n" in (repo / ".git" / "hooks" / "post-commit").read_text()
    assert "to $BPM_URL or the default URL" in out


def test_install_refuses_to_replace_a_hook_it_did_not_write(capsys, repo):
    hooks = repo / ".git" / "hooks"
    (hooks / "post-merge").write_text("#!/bin/sh\necho mine\n")

    code, _, err = install(capsys, repo)
    assert code == 4 and "post-merge" in err and "--force" in err
    assert not (hooks / "post-commit").exists()  # nothing written at all

    code, out, _ = install(capsys, repo, "--force")
    assert code == 0 and "post-merge.before-bpm" in out
    assert (hooks / "post-merge.before-bpm").read_text() == "#!/bin/sh\necho mine\n"
    assert MARKER in (hooks / "post-merge").read_text()
    assert install(capsys, repo, "--source", "other")[0] == 0  # its own: no --force needed
    assert "bpm_source=other" in (hooks / "post-commit").read_text()


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (("--secret-env", "NOT-A-NAME"), "--secret-env"),
        (("--source", "Bad Name"), "--source"),
        (("--timeout", "61"), "--timeout must be more than 0 and at most 60 seconds"),
    ],
)
def test_install_refuses_bad_options(capsys, repo, args, expected):
    code, _, err = install(capsys, repo, *args)
    assert code == 4 and expected in err, err
    assert not (repo / ".git" / "hooks" / "post-commit").exists()


def test_install_refuses_a_url_that_is_not_http(capsys, repo):
    code, _, err = install(capsys, repo, url="ftp://host")
    assert code == 4 and "http(s)://host" in err
    assert not (repo / ".git" / "hooks" / "post-commit").exists()


def test_install_refuses_what_is_not_a_repository(capsys, tmp_path):
    code, _, err = install(capsys, tmp_path)
    assert code == 4 and "is not a git repository" in err

"""The files a babysitter run names are read from inside its project only (issue 30).

A run's process writes `context.files`; what the bridge reads goes to reviewers, Slack,
email and JIRA. Each case goes through `breakpoint_request`, as the bridge does; files left
out are still listed, with a note saying which file and why in place of their text.
"""

import json
import os
import shutil
import tempfile
import threading
import traceback
from collections.abc import Iterator
from pathlib import Path

import pytest
from bpm_client.babysitter import Effect, Run, breakpoint_request
from bpm_client.babysitter.files import LeftOut, read_inside
from bpm_client.bodies import MAX_FILE_CHARS, file_text

SECRET = "root:x:0:0:the secret outside the project\n"
NOBODY = 65534
# A guard against a hang, not an assertion about speed.
GUARD_SECONDS = 60


@pytest.fixture
def project(tmp_path) -> Path:
    """A project folder, and beside it (outside) a secret file."""
    root = tmp_path / "project"
    (root / "docs").mkdir(parents=True)
    (root / "docs" / "plan.md").write_text("# Plan\n")
    (tmp_path / "secret.txt").write_text(SECRET)
    return root


def sent(project: Path, *paths: str) -> list[dict]:
    """The context files the bridge sends for a breakpoint naming `paths`."""
    task = {
        "kind": "breakpoint",
        "effectId": "01EFFECT",
        "metadata": {"payload": {"context": {"files": [{"path": p} for p in paths]}}},
    }
    effect = Effect.of(Run("01RUN", project / ".a5c" / "runs" / "01RUN"), task)
    request = breakpoint_request(effect, project)
    files = request["payload"]["context"]["files"]
    assert not any(SECRET in item["content"] for item in files)
    return files


def left_out(path: str, reason: str, shown: str | None = None) -> dict:
    note = f"[bpm babysitter left out {path}: {reason}. Nothing of it was sent.]"
    return {"path": shown or path, "format": "text", "content": note}


OUTSIDE = "it is outside the project directory (symlinks followed)"


def test_an_absolute_path_outside_the_project_is_left_out(project, tmp_path):
    outside = str(tmp_path / "secret.txt")
    assert sent(project, outside) == [left_out(outside, OUTSIDE, shown="secret.txt")]


def test_a_path_that_climbs_out_of_the_project_is_left_out(project):
    climbing = "../../../../../../../../" + str(project.parent / "secret.txt")
    assert sent(project, "../secret.txt", climbing) == [
        left_out("../secret.txt", OUTSIDE, shown="secret.txt"),
        left_out(climbing, OUTSIDE, shown="secret.txt"),
    ]


def test_a_symlink_that_leads_out_of_the_project_is_left_out(project):
    (project / "docs" / "notes.md").symlink_to(project.parent / "secret.txt")
    (project / "linked").symlink_to(project.parent)  # a folder link: secret.txt through it
    assert sent(project, "docs/notes.md", "linked/secret.txt") == [
        left_out("docs/notes.md", OUTSIDE),
        left_out("linked/secret.txt", OUTSIDE),
    ]


def test_a_symlink_within_the_project_is_read_as_its_target(project):
    (project / "current.md").symlink_to(project / "docs" / "plan.md")
    (project / "latest").symlink_to("docs")
    absolute = str(project / "latest" / "plan.md")
    assert sent(project, "current.md", absolute) == [
        {"path": "docs/plan.md", "content": "# Plan\n"},
        {"path": "docs/plan.md", "content": "# Plan\n"},
    ]


def test_a_fifo_is_left_out_without_waiting_for_a_writer(project):
    """Opening a FIFO to read waits until someone writes: the bridge would hang for good."""
    os.mkfifo(project / "pipe")
    outcome: list[list[dict]] = []
    worker = threading.Thread(target=lambda: outcome.append(sent(project, "pipe")), daemon=True)
    worker.start()
    worker.join(GUARD_SECONDS)
    if worker.is_alive():  # release the blocked reader before failing
        os.close(os.open(project / "pipe", os.O_WRONLY | os.O_NONBLOCK))
        pytest.fail("the bridge blocked on a FIFO")
    assert outcome == [[left_out("pipe", "it is a FIFO, not a regular file")]]


def test_a_device_is_left_out_unopened():
    """/dev as the project: its null is inside, but a character device, not a file."""
    files = sent(Path("/dev"), "null")
    assert files == [left_out("null", "it is a character device, not a regular file")]


def test_a_directory_or_the_project_itself_is_left_out(project):
    assert sent(project, "docs", ".") == [
        left_out("docs", "it is a directory, not a regular file"),
        left_out(".", "it is a directory, not a regular file"),
    ]


def test_a_missing_file_or_a_binary_one_is_left_out(project):
    (project / "image.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
    assert sent(project, "missing.txt", "image.png") == [
        left_out("missing.txt", "it cannot be read (No such file or directory)"),
        left_out("image.png", "it is a binary file (it holds NUL bytes)"),
    ]


def in_child_as_nobody(function) -> object:
    """function()'s JSON value, computed in a forked child that runs as nobody when the
    tests run as root (root reads every file, whatever its mode)."""
    reader, writer = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child
        code = 1
        try:
            if os.geteuid() == 0:
                os.setgroups([])
                os.setgid(NOBODY)
                os.setuid(NOBODY)
            os.write(writer, json.dumps(function()).encode())
            code = 0
        except BaseException:
            traceback.print_exc()
        finally:
            os._exit(code)
    os.close(writer)
    with os.fdopen(reader, "rb") as pipe:
        answer = pipe.read()
    assert os.waitpid(pid, 0)[1] == 0, "the child failed (its traceback is above)"
    return json.loads(answer)


@pytest.fixture
def shared_project() -> Iterator[Path]:
    """A project others may walk into (pytest's own temporary folders are the owner's)."""
    shared = Path(tempfile.mkdtemp(prefix="bpm-files-"))
    shared.chmod(0o755)
    yield shared / "project"
    shutil.rmtree(shared)


def test_an_unreadable_file_is_left_out_with_the_reason(shared_project):
    project = shared_project
    project.mkdir(mode=0o755)
    (project / "private.txt").write_text("no one but the owner")
    (project / "private.txt").chmod(0o000)
    (project / "open.txt").write_text("anyone")
    (project / "open.txt").chmod(0o644)
    files = in_child_as_nobody(lambda: sent(project, "private.txt", "open.txt"))
    assert files == [
        left_out("private.txt", "it cannot be read (Permission denied)"),
        {"path": "open.txt", "content": "anyone"},
    ]


def test_an_oversized_file_is_cut_at_the_limit_and_not_read_whole(project):
    """20 MB (sparse after its first text): what is sent stops at the limit, with a note
    of the file's size; the file's offset shows how far it was read."""
    big = project / "big.log"
    with big.open("w") as file:
        file.write("x" * (MAX_FILE_CHARS + 10))
        file.truncate(20_000_000)
    [entry] = sent(project, "big.log")
    assert entry["path"] == "big.log"
    assert entry["content"][:MAX_FILE_CHARS] == "x" * MAX_FILE_CHARS
    assert entry["content"][MAX_FILE_CHARS:] == (
        "\n[... cut by bpm: the file has 20,000,000 bytes; only its first 1,000,000 "
        "characters are sent ...]"
    )
    fd = os.open(big, os.O_RDONLY)
    try:
        file_text(fd)
        assert os.lseek(fd, 0, os.SEEK_CUR) < 2 * MAX_FILE_CHARS
    finally:
        os.close(fd)


def test_a_file_swapped_for_a_symlink_after_the_check_is_not_followed(project):
    """The resolved path holds no symlink: one that appears there (a race with the run's
    process) is refused, not followed out of the project."""
    (project / "docs" / "plan.md").unlink()
    (project / "docs" / "plan.md").symlink_to(project.parent / "secret.txt")
    with pytest.raises(LeftOut, match="changed while it was being read"):
        read_inside(project, Path("docs/plan.md"))
    (project / "later").symlink_to(project.parent)
    with pytest.raises(LeftOut, match="Too many levels of symbolic links|Not a directory"):
        read_inside(project, Path("later/secret.txt"))


def test_a_path_holding_a_nul_is_left_out_in_words_the_service_stores(project):
    [entry] = sent(project, "plan\x00.md")
    assert entry == {
        "path": "plan.md",
        "format": "text",
        "content": "[bpm babysitter left out plan\\x00.md: it is not a valid path. Nothing of "
        "it was sent.]",
    }


def secret(kind: str) -> str:
    return f"its name says it holds secrets ({kind}); rename it or name another file"


def test_files_that_hold_secrets_by_name_are_left_out_unread(project):
    """A run that names `.env` (or a key, or a file under .git/) sends none of it, even
    inside the project; a template of it, a public key and a plain file are read."""
    for name in (".env", ".env.production", "deploy/id_ed25519", "certs/server.pem", ".git/config"):
        (project / name).parent.mkdir(parents=True, exist_ok=True)
        (project / name).write_text("TOKEN=s3cr3t\n")
    (project / ".env.example").write_text("TOKEN=\n")
    (project / "deploy" / "id_ed25519.pub").write_text("ssh-ed25519 AAAA\n")
    (project / "docs" / "env.md").symlink_to(project / ".env")  # a link to it: the target counts
    files = sent(
        project,
        ".env",
        ".env.production",
        "deploy/id_ed25519",
        "certs/server.pem",
        ".git/config",
        "docs/env.md",
        ".env.example",
        "deploy/id_ed25519.pub",
    )
    assert not any("s3cr3t" in item["content"] for item in files)
    assert files == [
        left_out(".env", secret("an environment file")),
        left_out(".env.production", secret("an environment file")),
        left_out("deploy/id_ed25519", secret("a private key")),
        left_out("certs/server.pem", secret("a key or certificate file")),
        left_out(".git/config", secret("a git folder")),
        left_out("docs/env.md", secret("an environment file")),
        {"path": ".env.example", "content": "TOKEN=\n"},
        {"path": "deploy/id_ed25519.pub", "content": "ssh-ed25519 AAAA\n"},
    ]


def test_direnv_kubernetes_docker_and_terraform_secrets_are_left_out_unread(project):
    """`.envrc` (direnv), a kubeconfig, Docker's registry logins and Terraform state hold
    credentials by convention: none of them is sent; a file that only looks alike is read."""
    named = {
        ".envrc": "a direnv environment file",
        "deploy/.envrc": "a direnv environment file",
        ".kube/config": "a Kubernetes config (cluster credentials)",
        ".docker/config.json": "a Docker config (registry logins)",
        "infra/terraform.tfstate": "a Terraform state file",
        "infra/terraform.tfstate.backup": "a Terraform state file",
        "infra/PROD.TFSTATE": "a Terraform state file",
    }
    for name in (*named, ".docker/compose.yml", "docs/tfstate.md"):
        (project / name).parent.mkdir(parents=True, exist_ok=True)
        (project / name).write_text("TOKEN=s3cr3t\n")
    files = sent(project, *named, ".docker/compose.yml", "docs/tfstate.md")
    assert files == [
        *(left_out(name, secret(kind)) for name, kind in named.items()),
        {"path": ".docker/compose.yml", "content": "TOKEN=s3cr3t\n"},
        {"path": "docs/tfstate.md", "content": "TOKEN=s3cr3t\n"},
    ]

"""The files a run's breakpoint names (`context.files`), read from inside the project only.

A run's process writes the paths; the bridge sends each file's text to the service, where
reviewers (and Slack, email, JIRA) read it. So a path is read only when, its symlinks
resolved, it lies inside the project directory (the folder `bpm babysitter watch` runs
for) and names a regular file, and only its first 1,000,000 characters are read (the SDK's
cut, bodies.MAX_FILE_CHARS; the service takes at most 5,000,000). A file that holds
secrets by its name (`.env`, `.envrc`, a private key, `.kube/config`, Terraform state,
`.git/`, `.ssh/`: `secret_kind`) is never read, wherever in the project it is. Anything
else is left out: its entry says which file and why, in place of the text.

The check holds while the tree changes: the resolved path is opened one folder at a time
from the project's own, never following a symlink (the resolved path has none), and the
file opened is the regular file that was checked (fstat: same inode). Nothing but a
regular file is opened: a FIFO would block, a device may act on being opened.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping
from pathlib import Path, PurePath, PurePosixPath, PureWindowsPath
from typing import Any

from ..bodies import file_text

NOTE = "[bpm babysitter left out {path}: {reason}. Nothing of it was sent.]"
OUTSIDE = "it is outside the project directory (symlinks followed)"
CHANGED = "it changed while it was being read"
BINARY = "it is a binary file (it holds NUL bytes)"
SECRET = "its name says it holds secrets ({kind}); rename it or name another file"
# Files that hold credentials by convention, matched on every part of the resolved path:
# what lies in them would go to reviewers, Slack, email and JIRA.
_SECRET_FILES = {
    ".env": "an environment file",
    ".envrc": "a direnv environment file",
    ".netrc": "a login file",
    ".pgpass": "a password file",
    ".pypirc": "a package index login",
    ".npmrc": "a package registry login",
    ".git-credentials": "a login file",
    "id_rsa": "a private key",
    "id_dsa": "a private key",
    "id_ecdsa": "a private key",
    "id_ed25519": "a private key",
}
_SECRET_FOLDERS = {
    ".git": "a git folder",
    ".ssh": "an SSH folder",
    ".gnupg": "a GnuPG folder",
    ".aws": "an AWS credentials folder",
}
_SECRET_SUFFIXES = {
    ".pem": "a key or certificate file",
    ".key": "a key file",
    ".p12": "a key store",
    ".pfx": "a key store",
    ".tfstate": "a Terraform state file",
}
# Files that hold credentials by their folder and name: a kubeconfig, Docker's logins.
_SECRET_PATHS = {
    (".kube", "config"): "a Kubernetes config (cluster credentials)",
    (".docker", "config.json"): "a Docker config (registry logins)",
}
# Terraform's backup of its state (terraform.tfstate.backup) holds the same secrets.
_TFSTATE_BACKUP = ".tfstate.backup"
# Templates of an environment file hold no secrets by convention: they are read.
_ENV_TEMPLATES = {".example", ".sample", ".template", ".dist"}
# Absent where the OS has no such flag (Windows): the checks before and after still hold.
_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_FILE_FLAGS = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0) | _NOFOLLOW
_KINDS = {
    stat.S_IFDIR: "a directory",
    stat.S_IFIFO: "a FIFO",
    stat.S_IFSOCK: "a socket",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
}


class LeftOut(Exception):
    """A file the bridge does not send; the message says why."""


def project_file(item: Mapping[str, Any], project_dir: Path) -> dict[str, Any]:
    """The context file `item` (its `path` relative to the project, or absolute) with its
    text; a file left out gets a note in its place."""
    given: str = item["path"]
    try:
        relative = inside(project_dir, given)
        content = read_inside(project_dir, relative)
    except LeftOut as out:
        return left_out(item, str(out))
    return {**item, "path": relative.as_posix(), "content": content}


def inside(project_dir: Path, given: str) -> PurePath:
    """`given`, symlinks resolved, relative to the project; LeftOut when it leads out."""
    root = project_dir.resolve()
    try:
        target = (root / given).resolve()  # an absolute path stays absolute
    except (OSError, RuntimeError) as error:  # a symlink loop (RuntimeError until 3.13)
        raise LeftOut(f"its symlinks do not resolve ({error})") from None
    except ValueError:  # a NUL in the path
        raise LeftOut("it is not a valid path") from None
    try:
        relative = target.relative_to(root)
    except ValueError:
        raise LeftOut(OUTSIDE) from None
    kind = secret_kind(relative)
    if kind is not None:
        raise LeftOut(SECRET.format(kind=kind))
    return relative


def secret_kind(relative: PurePath) -> str | None:
    """What kind of secret `relative`'s name says it holds, or None: `.env` and
    `.env.<anything>` but its templates (`.env.example`), `.envrc`, login files, private
    keys and key stores, Terraform state (`*.tfstate`, its `.backup`), `.kube/config`,
    `.docker/config.json`, and anything under `.git/`, `.ssh/`, `.gnupg/` or `.aws/`."""
    *folders, name = relative.parts or ("",)
    for folder in folders:
        if folder.lower() in _SECRET_FOLDERS:
            return _SECRET_FOLDERS[folder.lower()]
    lowered = name.lower()
    if lowered.startswith(".env.") and lowered[4:] not in _ENV_TEMPLATES:
        return _SECRET_FILES[".env"]
    if lowered in _SECRET_FILES:  # id_rsa, not id_rsa.pub
        return _SECRET_FILES[lowered]
    if folders and (folders[-1].lower(), lowered) in _SECRET_PATHS:
        return _SECRET_PATHS[(folders[-1].lower(), lowered)]
    if lowered.endswith(_TFSTATE_BACKUP):
        return _SECRET_SUFFIXES[".tfstate"]
    return _SECRET_SUFFIXES.get(PurePosixPath(lowered).suffix)


def read_inside(project_dir: Path, relative: PurePath) -> str:
    """The text of the regular file at `relative` under the project (no symlinks in it)."""
    try:
        fd = open_inside(project_dir.resolve(), relative)
    except OSError as error:
        raise LeftOut(f"it cannot be read ({error.strerror or error})") from None
    try:
        content = file_text(fd)
    except OSError as error:
        raise LeftOut(f"it cannot be read ({error.strerror or error})") from None
    finally:
        os.close(fd)
    if "\x00" in content:
        raise LeftOut(BINARY)
    return content


def open_inside(root: Path, relative: PurePath) -> int:
    """A descriptor of the regular file at `relative` under `root`.

    Each folder is opened from the one before without following symlinks: one that
    appeared since the path was resolved fails the open (ELOOP, ENOTDIR)."""
    *folders, name = relative.parts or (".",)
    if os.open not in os.supports_dir_fd:  # no openat (Windows): the resolved path itself
        return _checked(str(root / relative), None)
    parent = os.open(root, os.O_RDONLY | _DIRECTORY)
    try:
        for folder in folders:
            child = os.open(folder, os.O_RDONLY | _DIRECTORY | _NOFOLLOW, dir_fd=parent)
            os.close(parent)
            parent = child
        return _checked(name, parent)
    finally:
        os.close(parent)


def _checked(name: str, parent: int | None) -> int:
    """Open `name` only if it is a regular file, and make sure the one opened is that."""
    seen = os.stat(name, dir_fd=parent, follow_symlinks=False)
    if stat.S_ISLNK(seen.st_mode):  # none was there when the path was resolved
        raise LeftOut(CHANGED)
    if not stat.S_ISREG(seen.st_mode):
        kind = _KINDS.get(stat.S_IFMT(seen.st_mode), "something else")
        raise LeftOut(f"it is {kind}, not a regular file")
    # O_NONBLOCK: should a FIFO have taken its place, the open does not wait for a writer
    # (a regular file's reads never wait, with or without it).
    fd = os.open(name, _FILE_FLAGS, dir_fd=parent)
    opened = os.fstat(fd)
    same = (opened.st_dev, opened.st_ino) == (seen.st_dev, seen.st_ino)
    if not (same and stat.S_ISREG(opened.st_mode)):
        os.close(fd)
        raise LeftOut(CHANGED)
    return fd


def left_out(item: Mapping[str, Any], reason: str) -> dict[str, Any]:
    """The entry sent in place of a file left out: a path the service takes (the one
    given when it is a plain relative path, else its last part) and a note as its text."""
    given: str = item["path"]
    note = NOTE.format(path=given.replace("\x00", "\\x00"), reason=reason)  # storable
    return {"path": shown_path(given), "format": "text", "content": note}


def shown_path(given: str) -> str:
    """`given` when the service takes it as is (relative, no '..'), else its bare name."""
    posix, windows = PurePosixPath(given), PureWindowsPath(given)
    plain = not (posix.is_absolute() or windows.is_absolute() or windows.drive)
    relative = plain and ".." not in posix.parts and ".." not in windows.parts
    if relative and given.strip() and "\x00" not in given:
        return given
    name = windows.name if windows.name not in ("", "..") else ""
    return name.replace("\x00", "") or "file"

"""Podman, and compose.yaml's services run with it as `docker compose` would run them.

No registry can be reached from CI, so compose itself cannot pull postgres:16 and redis:7.
`ComposeStack` runs the project's own services (migrate, web, worker, beat) from
compose.yaml with podman instead: the same image, command (the role), env_file and
environment (interpolated as compose does, `${VAR:?message}` refusing an empty VAR),
data volume, health check, ulimits (as shipped: never capped to what this machine
allows) and stop grace period; only the database and the broker are the machine's own
(host network), where compose would start its postgres and redis services.
"""

import json
import os
import re
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

PROJECT_DIR = Path(__file__).resolve().parents[2]
# Podman as these machines need it (docs/deploy.md, "CI"): no systemd, so cgroupfs; podman's
# default process and open-file limits (rootful: 1048576) cannot be set in a container
# here, so ones that can: compose.yaml's own nofile for its services, this one otherwise.
NPROC_LIMIT = 4096
DEFAULT_NOFILE = 4096


def engine_options() -> list[str]:
    """Podman's global options on a machine without systemd (as deploy/build-image.sh)."""
    if Path("/run/systemd/system").is_dir():
        return []
    return ["--cgroup-manager=cgroupfs", "--runtime", "runc"]


def podman(
    *args: str,
    check: bool = True,
    timeout: float = 300,
    open_files: int | None = None,
    **kwargs: Any,
):
    """Run `podman ARGS` and return the CompletedProcess (text); fail with its output.
    `open_files`: podman, and the container runtime it starts, run with this open-file
    limit (soft and hard), as on a host that allows no more."""
    limit = ["prlimit", f"--nofile={open_files}:{open_files}", "--"] if open_files else []
    result = subprocess.run(
        [*limit, "podman", *engine_options(), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        **kwargs,
    )
    if check and result.returncode != 0:
        raise AssertionError(
            f"podman {' '.join(args)} exited {result.returncode}:\n"
            f"{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
        )
    return result


class MissingVariable(Exception):
    """compose's `${VAR:?message}`: VAR is unset or empty, so compose refuses to start."""


_VARIABLE = re.compile(r"\$\$|\$\{(?P<name>\w+)(?:(?P<op>:[?-])(?P<arg>[^}]*))?\}")


def interpolate(value: str, env: Mapping[str, str]) -> str:
    """`${VAR}`, `${VAR:-default}`, `${VAR:?message}` and `$$` as compose reads them."""

    def substitute(match: re.Match[str]) -> str:
        if match.group(0) == "$$":
            return "$"
        name, op, arg = match["name"], match["op"], match["arg"]
        current = env.get(name, "")
        if op == ":?" and not current:
            raise MissingVariable(f"{name}: {arg}")
        if op == ":-" and not current:
            return arg
        return current

    return _VARIABLE.sub(substitute, value)


def read_env_file(path: Path) -> dict[str, str]:
    """KEY=value lines (comments and blank lines skipped), as compose and podman read .env."""
    values = {}
    for line in path.read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            key, _, value = line.partition("=")
            values[key.strip()] = value
    return values


def load_compose() -> dict[str, Any]:
    return yaml.safe_load((PROJECT_DIR / "compose.yaml").read_text())


def seconds(duration: str) -> int:
    """A compose duration ("80s", "3m10s", "1h") in whole seconds."""
    parts = re.fullmatch(r"(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?", str(duration))
    assert parts and any(parts.groups()), f"not a compose duration: {duration!r}"
    hours, minutes, secs = (int(part or 0) for part in parts.groups())
    return hours * 3600 + minutes * 60 + secs


def healthcheck_options(service: Mapping[str, Any]) -> list[str]:
    """compose's healthcheck as podman run options (run on demand: no systemd timers)."""
    check = service.get("healthcheck") or {}
    if check.get("disable"):
        return ["--no-healthcheck"]
    test = check.get("test")
    if not test:
        return ["--health-interval=disable"]  # the image's own HEALTHCHECK
    kind, *command = test
    assert kind in ("CMD", "CMD-SHELL"), f"healthcheck test {test!r}"
    as_run = json.dumps(command) if kind == "CMD" else command[0].replace("$$", "$")
    return ["--health-cmd", as_run, "--health-interval=disable"]


def ulimit_options(service: Mapping[str, Any], env: Mapping[str, str] | None = None) -> list[str]:
    """compose's nofile limit as it ships (interpolated from `env`, the .env file), with no
    cap: a value the host cannot give must fail here as it fails under compose."""
    nofile = service.get("ulimits", {}).get("nofile", DEFAULT_NOFILE)
    if isinstance(nofile, Mapping):  # compose's long form; soft and hard alike here
        assert nofile["soft"] == nofile["hard"], f"nofile {nofile}"
        nofile = nofile["hard"]
    nofile = int(interpolate(str(nofile), env or {}))
    return [
        "--ulimit",
        f"nofile={nofile}:{nofile}",
        "--ulimit",
        f"nproc={NPROC_LIMIT}:{NPROC_LIMIT}",
    ]


def run_once(image: str, *args: str, options: tuple[str, ...] = (), **kwargs: Any):
    """`podman run --rm IMAGE ARGS` on the host's network, with limits a container may have
    here."""
    defaults = ["--rm", "--network=host", "--no-healthcheck", *ulimit_options({})]
    return podman("run", *defaults, *options, image, *args, **kwargs)


@dataclass
class ComposeStack:
    """compose.yaml's project services on podman: `image`, `env_file` and `overrides`
    (what differs here: the databases, the port); containers and the data volume are
    named after `prefix` and removed by `remove()`."""

    image: str
    env_file: Path
    prefix: str
    overrides: dict[str, str]
    # The host's open-file limit, as podman (and so the container runtime) gets it: a host
    # that allows containers no more than this many (None: this machine's own).
    host_open_files: int | None = None
    compose: dict[str, Any] = field(default_factory=load_compose)
    started: list[str] = field(default_factory=list)

    @property
    def volume(self) -> str:
        return f"{self.prefix}-data"

    def service(self, name: str) -> dict[str, Any]:
        return self.compose["services"][name]

    def dotenv(self) -> dict[str, str]:
        """What compose interpolates compose.yaml with: the .env file, then the shell's."""
        return {**read_env_file(self.env_file), **os.environ}

    def environment(self, name: str) -> dict[str, str]:
        """The service's `environment`, interpolated from the .env file, then overridden."""
        dotenv = self.dotenv()
        declared = self.service(name).get("environment", {})
        values = {key: interpolate(str(value), dotenv) for key, value in declared.items()}
        return {**values, **self.overrides}

    def podman(self, *args: str, **kwargs: Any):
        """`podman ARGS` under the host's open-file limit (`host_open_files`)."""
        return podman(*args, open_files=self.host_open_files, **kwargs)

    def run_options(self, name: str) -> list[str]:
        service = self.service(name)
        options = ["--network=host", "--env-file", str(self.env_file)]
        for key, value in self.environment(name).items():
            options += ["-e", f"{key}={value}"]
        for volume in service.get("volumes", []):
            source, _, target = volume.partition(":")
            assert source == "bpm-data", f"an unexpected volume: {volume}"
            options += ["-v", f"{self.volume}:{target}"]
        return options + ulimit_options(service, self.dotenv())

    def start(self, name: str) -> str:
        """`docker compose up NAME`, detached: the container's name."""
        service = self.service(name)
        container = f"{self.prefix}-{name}"
        options = [*self.run_options(name), *healthcheck_options(service)]
        if "stop_grace_period" in service:
            options += ["--stop-timeout", str(seconds(service["stop_grace_period"]))]
        self.started.append(container)
        self.podman("run", "-d", "--name", container, *options, self.image, *service["command"])
        return container

    def run(self, name: str, *args: str, stdin: str | None = None, check: bool = True):
        """`docker compose run --rm --no-deps NAME ARGS` (the role and its arguments)."""
        options = [*self.run_options(name), "--no-healthcheck", "--rm"]
        if stdin is not None:
            options.append("-i")
        return self.podman("run", *options, self.image, *args, input=stdin, check=check)

    def stop(self, name: str) -> int:
        """`docker compose stop NAME`: SIGTERM, SIGKILL after the stop grace period (the
        container's --stop-timeout); the container's exit status."""
        container = f"{self.prefix}-{name}"
        podman("stop", container, timeout=600)
        return int(podman("inspect", "--format", "{{.State.ExitCode}}", container).stdout)

    def logs(self, name: str) -> str:
        result = podman("logs", f"{self.prefix}-{name}", check=False)
        return result.stdout + result.stderr

    def remove(self) -> None:
        for container in self.started:
            podman("rm", "--force", "--time", "0", container, check=False)
        podman("volume", "rm", "--force", self.volume, check=False)

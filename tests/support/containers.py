"""Podman, and compose.yaml's services run with it as `docker compose` would run them.

No registry can be reached from CI, so compose itself cannot pull postgres:16 and redis:7.
`ComposeStack` runs the project's own services (migrate, web, worker, beat) from
compose.yaml with podman instead: the same image, command (the role), env_file and
environment (interpolated as compose does, `${VAR:?message}` refusing an empty VAR),
data volume, health check, ulimits and stop grace period; only the database and the
broker are the machine's own (host network), where compose would start its postgres and
redis services.
"""

import json
import os
import re
import resource
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

PROJECT_DIR = Path(__file__).resolve().parents[2]
# Podman as these machines need it (docs/deploy.md, "CI"): no systemd, so cgroupfs; the
# default open-files limit cannot be set in a container here, so one that can.
NPROC_LIMIT = 4096
DEFAULT_NOFILE = 4096


def engine_options() -> list[str]:
    """Podman's global options on a machine without systemd (as deploy/build-image.sh)."""
    if Path("/run/systemd/system").is_dir():
        return []
    return ["--cgroup-manager=cgroupfs", "--runtime", "runc"]


def podman(*args: str, check: bool = True, timeout: float = 300, **kwargs: Any):
    """Run `podman ARGS` and return the CompletedProcess (text); fail with its output."""
    result = subprocess.run(
        ["podman", *engine_options(), *args],
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


def ulimit_options(service: Mapping[str, Any]) -> list[str]:
    """compose's nofile limit, capped at what this machine allows a container."""
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    nofile = service.get("ulimits", {}).get("nofile", {}).get("hard", DEFAULT_NOFILE)
    if hard != resource.RLIM_INFINITY:
        nofile = min(nofile, hard)
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
    compose: dict[str, Any] = field(default_factory=load_compose)
    started: list[str] = field(default_factory=list)

    @property
    def volume(self) -> str:
        return f"{self.prefix}-data"

    def service(self, name: str) -> dict[str, Any]:
        return self.compose["services"][name]

    def environment(self, name: str) -> dict[str, str]:
        """The service's `environment`, interpolated from the .env file, then overridden."""
        dotenv = {**read_env_file(self.env_file), **os.environ}
        declared = self.service(name).get("environment", {})
        values = {key: interpolate(str(value), dotenv) for key, value in declared.items()}
        return {**values, **self.overrides}

    def run_options(self, name: str) -> list[str]:
        service = self.service(name)
        options = ["--network=host", "--env-file", str(self.env_file)]
        for key, value in self.environment(name).items():
            options += ["-e", f"{key}={value}"]
        for volume in service.get("volumes", []):
            source, _, target = volume.partition(":")
            assert source == "bpm-data", f"an unexpected volume: {volume}"
            options += ["-v", f"{self.volume}:{target}"]
        return options + ulimit_options(service)

    def start(self, name: str) -> str:
        """`docker compose up NAME`, detached: the container's name."""
        service = self.service(name)
        container = f"{self.prefix}-{name}"
        options = [*self.run_options(name), *healthcheck_options(service)]
        if "stop_grace_period" in service:
            options += ["--stop-timeout", str(seconds(service["stop_grace_period"]))]
        self.started.append(container)
        podman("run", "-d", "--name", container, *options, self.image, *service["command"])
        return container

    def run(self, name: str, *args: str, stdin: str | None = None, check: bool = True):
        """`docker compose run --rm --no-deps NAME ARGS` (the role and its arguments)."""
        options = [*self.run_options(name), "--no-healthcheck", "--rm"]
        if stdin is not None:
            options.append("-i")
        return podman("run", *options, self.image, *args, input=stdin, check=check)

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

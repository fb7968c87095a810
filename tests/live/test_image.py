"""The container image, built with `make image` and run as compose.yaml and docs/deploy.md say.

Builds the Dockerfile (podman; on a base made by debootstrap where no registry answers),
checks what the image is (non-root, lean, labelled, no CA baked in), then runs compose.yaml's
migrate, web, worker, triggers and beat services on the machine's PostgreSQL (a database of
the test's own) and Redis (a database number of its own), with podman limited to 4096 open
files (a host allowing no more) and compose.yaml's limits as shipped; no start log has an
ERROR line. `manage` creates an agent token, a reviewer and a webhook subscription, an
agent's long-poll is woken by the reviewer's approval over the API, and a signed webhook
arrives at a receiver on 127.0.0.1. Then each container gets SIGTERM with work in flight
and must exit 0 within its stop grace period. Last, docs/deploy.md's `docker run` lines run
every role on the same databases.

Building images is slow and needs podman: the tests run only with BPM_TEST_IMAGE=1
(`.ci/run` sets it in its phase `image`, after installing podman, runc and debootstrap).
IMAGE_TEST_DATABASE_URL (default postgres://postgres@127.0.0.1:5432/bpm_image_test; dropped
and created again) and IMAGE_TEST_REDIS_URL (default redis://127.0.0.1:6379/13; flushed)
name the databases. Teardown removes the containers, the volume, the image and dangling
build layers; the base image stays (debootstrap is not repeated).
"""

import json
import os
import re
import secrets
import shlex
import shutil
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
import redis
from psycopg import sql
from standardwebhooks.webhooks import Webhook as StandardWebhook

from tests.support.containers import (
    NPROC_LIMIT,
    PROJECT_DIR,
    ComposeStack,
    MissingVariable,
    interpolate,
    load_compose,
    podman,
    read_env_file,
    run_once,
)
from tests.support.net import free_port
from tests.support.webhook_receiver import WebhookReceiver, expected_signature

# Builds and runs the container image (minutes, podman): deselected unless
# BPM_TEST_IMAGE=1 (.ci/run sets it in its phase `image`; tests/conftest.py).
pytestmark = pytest.mark.image

IMAGE = "localhost/bpm-image-test:latest"
BASE = "docker.io/library/debian:bookworm-slim"
DATABASE_URL = os.environ.get(
    "IMAGE_TEST_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/bpm_image_test"
)
REDIS_URL = os.environ.get("IMAGE_TEST_REDIS_URL", "redis://127.0.0.1:6379/13")
MAX_ADDED_BYTES = 250_000_000
DEPLOY_DOC = PROJECT_DIR / "docs" / "deploy.md"
READY_SECONDS = 120
SECRET = "image-test-webhook-secret"
# The stack runs on a host that allows a container no more open files than this (a
# locked-down host's, rootless podman's): podman is started under it, with compose.yaml's
# limits as shipped.
HOST_OPEN_FILES = 4096
# The commands of docs/deploy.md this test runs (as `docker compose run` runs them).
DOC_COMMANDS = [
    "make image",
    "cp .env.example .env",
    "docker compose run --rm --no-deps web manage create_reviewer admin --admin --email admin@example.com",
    "docker compose run --rm --no-deps web manage create_agent_token agent-7",
    "docker compose run --rm --no-deps web manage create_user_token admin",
    "docker compose run --rm --no-deps web manage add_webhook",
    "docker compose run --rm migrate",
]


def wait_for(predicate: Callable[[], Any], what: str, timeout: float = READY_SECONDS) -> Any:
    deadline = time.monotonic() + timeout
    while not (value := predicate()):
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout} s: {what}")
        time.sleep(0.5)
    return value


def last_line(output: str) -> str:
    return output.strip().splitlines()[-1].strip()


@pytest.fixture(scope="module")
def image() -> Iterator[str]:
    """`make image`, as docs/deploy.md builds it (podman, the machine's proxy CA)."""
    if shutil.which("podman") is None:
        pytest.fail("podman is not installed (apt-get install podman runc debootstrap)")
    result = subprocess.run(
        ["make", "image", f"IMAGE={IMAGE}"],
        cwd=PROJECT_DIR,
        env={**os.environ, "CONTAINER_ENGINE": "podman"},
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert result.returncode == 0, f"make image:\n{result.stdout[-4000:]}\n{result.stderr[-4000:]}"
    try:
        yield IMAGE
    finally:
        podman("rmi", "--force", IMAGE, check=False)
        podman("image", "prune", "--force", check=False)


def inspect(name: str) -> dict[str, Any]:
    return json.loads(podman("image", "inspect", name).stdout)[0]


def test_the_image_is_lean_runs_as_non_root_and_keeps_no_build_secret(image):
    """Non-root (numeric, for runAsNonRoot), under 250 MB over its base, no compiler or
    pip, the HEALTHCHECK and OCI labels kept, and no trace of the build's CA mount."""
    inspected = inspect(image)
    config = inspected["Config"]
    assert config["User"] == "10001:10001"
    whoami = run_once(image, "-u", options=("--entrypoint", "id"))
    assert whoami.stdout.strip() == "10001"
    added = inspect(image)["Size"] - inspect(BASE)["Size"]
    assert added < MAX_ADDED_BYTES, f"the image adds {added / 1e6:.0f} MB to its base"
    tools = run_once(
        image,
        "-c",
        "for tool in gcc cc make pip pip3; do command -v $tool || true; done; "
        "ls /run/secrets 2>/dev/null || true",
        options=("--entrypoint", "sh"),
    )
    assert tools.stdout.strip() == "", f"in the image: {tools.stdout}"
    # The agent client's code rides along (the deprecated send_event & co. run on it).
    client = run_once(image, "-m", "bpm_client", "events", "send", "--help",
                      options=("--entrypoint", "python"))  # fmt: skip
    assert "--secret" in client.stdout, client.stdout + client.stderr
    assert not any(item.startswith("PIP_CERT=") for item in config.get("Env", []))
    healthcheck = inspected.get("Healthcheck") or config["Healthcheck"]  # podman's, docker's
    assert healthcheck["Test"] == ["CMD", "python", "/app/deploy/healthcheck.py"]
    labels = config["Labels"]
    assert labels["org.opencontainers.image.title"] == "Breakpoint Manager"
    version = re.search(r'^version = "(.+)"$', (PROJECT_DIR / "pyproject.toml").read_text(), re.M)
    assert labels["org.opencontainers.image.version"] == version.group(1)
    assert config["Entrypoint"] == ["/app/deploy/entrypoint.sh"] and config["Cmd"] == ["web"]


def entrypoint_roles(image: str) -> set[str]:
    """The roles the image's entrypoint knows, from its own help."""
    usage = run_once(image, "help").stdout
    return set(re.findall(r"^  (\w+)\b", usage, flags=re.MULTILINE))


def test_compose_runs_every_service_in_a_role_the_entrypoint_knows_in_order(image):
    """compose.yaml parses; the project's services use the image in a known role; postgres
    and redis are the official images with health checks; web, worker and beat start after
    migrate completed and the databases are healthy; SECRET_KEY has no default."""
    compose = load_compose()
    services = compose["services"]
    assert set(services) == {"postgres", "redis", "migrate", "web", "worker", "triggers", "beat"}
    roles = entrypoint_roles(image)
    assert {"web", "worker", "triggers", "beat", "migrate", "manage"} <= roles
    for name in ("migrate", "web", "worker", "triggers", "beat"):
        assert services[name]["build"] == "."
        assert services[name]["command"][0] in roles, name
        assert services[name]["command"] == [name]
    assert services["postgres"]["image"] == "postgres:16"
    assert services["postgres"]["volumes"][0].split(":")[0] in compose["volumes"]
    assert services["redis"]["image"] == "redis:7"
    for name in ("postgres", "redis", "web", "worker", "triggers"):
        assert services[name]["healthcheck"]["test"], name
    after = {
        "postgres": {"condition": "service_healthy"},
        "redis": {"condition": "service_healthy"},
        "migrate": {"condition": "service_completed_successfully"},
    }
    for name in ("web", "worker", "triggers", "beat"):
        assert services[name]["depends_on"] == after, name
    assert services["migrate"]["depends_on"] == {"postgres": {"condition": "service_healthy"}}
    assert services["migrate"]["restart"] == "no"
    with pytest.raises(MissingVariable, match="SECRET_KEY"):
        interpolate(services["web"]["environment"]["SECRET_KEY"], {"SECRET_KEY": ""})


def test_compose_asks_for_no_more_open_files_than_a_small_host_allows():
    """Every container of the image gets compose.yaml's nofile limit; as shipped (its
    default, and .env.example's value) a host allowing HOST_OPEN_FILES can give it: above
    the host's, no container starts at all."""
    services = load_compose()["services"]
    example = read_env_file(PROJECT_DIR / ".env.example")
    for name in ("migrate", "web", "worker", "triggers", "beat"):
        nofile = services[name].get("ulimits", {}).get("nofile")
        assert isinstance(nofile, dict), f"{name} asks for no open-file limit: podman's is 1048576"
        for env in ({}, example):
            asked = {int(interpolate(str(nofile[which]), env)) for which in ("soft", "hard")}
            assert asked == {HOST_OPEN_FILES}, f"{name}: nofile {asked} with {env or 'no .env'}"


def test_the_env_example_names_every_setting_and_runs_nothing_until_filled_in(image):
    """.env.example sets what compose.yaml interpolates; as it comes (SECRET_KEY empty)
    a management command refuses to run, saying why."""
    example = read_env_file(PROJECT_DIR / ".env.example")
    used = set(re.findall(r"\$\{(\w+)", (PROJECT_DIR / "compose.yaml").read_text()))
    assert used <= set(example), f"not in .env.example: {used - set(example)}"
    assert example["SECRET_KEY"] == "" and example["POSTGRES_PASSWORD"] == ""
    env_file = ("--env-file", str(PROJECT_DIR / ".env.example"))
    refused = run_once(image, "manage", "check", options=env_file, check=False)
    assert refused.returncode != 0
    assert "SECRET_KEY must be set" in refused.stderr


def test_the_deploy_guide_has_the_commands_this_test_runs():
    guide = DEPLOY_DOC.read_text()
    missing = [command for command in DOC_COMMANDS if command not in guide]
    assert not missing, f"docs/deploy.md lacks: {missing}"


def fresh_databases() -> None:
    """The test's own PostgreSQL database (dropped: migrate creates it) and Redis number."""
    server, _, name = DATABASE_URL.rpartition("/")
    with psycopg.connect(f"{server}/postgres", autocommit=True) as connection:
        connection.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
        )
    client = redis.Redis.from_url(REDIS_URL)
    try:
        client.flushdb()
    finally:
        client.close()


def dotenv(path: Path) -> Path:
    """`cp .env.example .env`, filled in as docs/deploy.md says."""
    text = (PROJECT_DIR / ".env.example").read_text()
    filled = {
        "SECRET_KEY": secrets.token_urlsafe(50),
        "POSTGRES_PASSWORD": secrets.token_urlsafe(16),
        "BPM_WEBHOOK_ALLOWED_HOSTS": "127.0.0.1",  # the receiver is on this machine
        "WORKER_CONCURRENCY": "2",
    }
    for key, value in filled.items():
        text, count = re.subn(rf"^{key}=.*$", f"{key}={value}", text, flags=re.MULTILINE)
        assert count == 1, key
    path.write_text(text)
    return path


class Stack(ComposeStack):
    migrate_log = ""

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.overrides['PORT']}"

    def manage(self, *args: str, stdin: str | None = None) -> str:
        return self.run("web", "manage", *args, stdin=stdin).stdout


@pytest.fixture(scope="module")
def stack(image, tmp_path_factory) -> Iterator[Stack]:
    """compose.yaml's migrate (exits 0), then web, worker, triggers and beat, until /readyz
    is 200."""
    fresh_databases()
    port = free_port()
    overrides = {
        "DATABASE_URL": DATABASE_URL,
        "REDIS_URL": REDIS_URL,
        "PORT": str(port),
        "BPM_PUBLIC_URL": f"http://127.0.0.1:{port}",
        # Only a NOTIFY can answer a wait in time: no safety re-check within the test.
        "BPM_WAIT_RECHECK_SECONDS": "600",
    }
    env_file = dotenv(tmp_path_factory.mktemp("compose") / ".env")
    prefix = f"bpm-image-test-{os.getpid()}"
    stack = Stack(
        image=image,
        env_file=env_file,
        prefix=prefix,
        overrides=overrides,
        host_open_files=HOST_OPEN_FILES,
    )
    try:
        migrated = stack.run("migrate", *stack.service("migrate")["command"], check=False)
        stack.migrate_log = migrated.stdout + migrated.stderr
        assert migrated.returncode == 0, stack.migrate_log
        for name in ("web", "worker", "triggers", "beat"):
            stack.start(name)
        wait_for(lambda: ready(stack), "web answers /readyz 200 (database and broker ok)")
        yield stack
    finally:
        stack.remove()


def ready(stack: Stack) -> bool:
    try:
        return httpx.get(f"{stack.base_url}/readyz", timeout=5).status_code == 200
    except httpx.HTTPError:
        return False


@pytest.fixture(scope="module")
def receiver() -> Iterator[WebhookReceiver]:
    with WebhookReceiver() as server:
        yield server


@pytest.fixture(scope="module")
def people(stack, receiver) -> dict[str, httpx.Client]:
    """An agent token, an admin (password on stdin) and their API clients, made with
    `manage` as docs/deploy.md does; a webhook subscription to the receiver."""
    agent = last_line(stack.manage("create_agent_token", "agent-7"))
    stack.manage(
        "create_reviewer", "admin", "--admin", "--email", "admin@example.com",
        stdin="a-long-passphrase-42\n",
    )  # fmt: skip
    reviewer = last_line(stack.manage("create_user_token", "admin"))
    stack.manage("add_webhook", receiver.url, "--secret", SECRET)
    return {
        role: httpx.Client(
            base_url=stack.base_url, headers={"Authorization": f"Bearer {token}"}, timeout=90
        )
        for role, token in (("agent", agent), ("reviewer", reviewer))
    }


def create(agent: httpx.Client, title: str) -> str:
    response = agent.post(
        "/api/breakpoints", json={"title": title, "payload": {"question": f"{title}?"}}
    )
    assert response.status_code == 201, response.text
    return response.json()["breakpointId"]


def longpolls_open(stack: Stack) -> float:
    """bpm_longpolls_open at /metrics (the web processes write it every few seconds)."""
    text = httpx.get(f"{stack.base_url}/metrics", timeout=5).text
    found = re.search(r"^bpm_longpolls_open(?:\{[^}]*\})? (\S+)$", text, flags=re.MULTILINE)
    return float(found.group(1)) if found else 0.0


def in_background(work: Callable[[], Any]) -> Callable[[], Any]:
    """Start `work` in a thread; the returned function joins it and gives its result."""
    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            outcome["value"] = work()
        except BaseException as exc:  # noqa: BLE001 - handed to the test
            outcome["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()

    def result() -> Any:
        thread.join(timeout=300)
        assert not thread.is_alive(), "the background work did not end"
        if "error" in outcome:
            raise outcome["error"]
        return outcome["value"]

    return result


def test_every_role_runs_on_a_host_allowing_4096_open_files(stack):
    """podman ran each container under HOST_OPEN_FILES (a host allowing no more); each runs,
    with the limit compose.yaml asked for as shipped."""
    for name in ("web", "worker", "triggers", "beat"):
        limits = podman("exec", f"{stack.prefix}-{name}", "cat", "/proc/1/limits").stdout
        open_files = re.search(r"^Max open files +(\d+) +(\d+) ", limits, flags=re.MULTILINE)
        assert open_files, limits
        assert open_files.groups() == (str(HOST_OPEN_FILES),) * 2, name


def error_lines(log: str) -> list[str]:
    """The lines logged at ERROR or CRITICAL (gunicorn's "[ERROR]", Celery's
    "ERROR/MainProcess", the JSON logs' "level": "ERROR")."""
    return [line for line in log.splitlines() if re.search(r"\b(ERROR|CRITICAL)\b", line)]


def test_the_start_logs_have_no_error_line(stack):
    """The first ERROR an operator reads must be a real one: none while all is well."""
    for name, started in (("worker", " ready."), ("triggers", " ready."), ("beat", "Starting")):
        wait_for(lambda: started in stack.logs(name), f"{name} logs {started!r}")  # noqa: B023
    assert error_lines(stack.migrate_log) == [], stack.migrate_log
    for name in ("web", "worker", "triggers", "beat"):
        log = stack.logs(name)
        assert error_lines(log) == [], f"{name}:\n{log}"


def test_an_approval_over_the_api_wakes_the_agent_and_sends_a_signed_webhook(
    stack, people, receiver
):
    agent, reviewer = people["agent"], people["reviewer"]
    bp_id = create(agent, "Deploy to production")
    waited = in_background(lambda: agent.get(f"/api/breakpoints/{bp_id}/status?wait=60"))
    wait_for(lambda: longpolls_open(stack) >= 1, "the agent's long-poll is held")

    approved = reviewer.post(
        f"/api/breakpoints/{bp_id}/feedback",
        json={"comment": "Go ahead", "release": True, "approved": True},
    )
    assert approved.status_code == 201, approved.text
    answer = waited()
    assert answer.status_code == 200, answer.text
    assert answer.json()["status"] == "released"
    assert answer.json()["result"]["approved"] is True

    def released(got):
        return [r for r in got if r.json()["type"] == "breakpoint.released"]

    [hook] = released(receiver.wait_for(released, timeout=60, what="the released webhook"))
    assert hook.json()["data"]["breakpointId"] == bp_id
    assert StandardWebhook(SECRET.encode()).verify(hook.body, hook.headers)
    assert hook.headers["webhook-signature"] == expected_signature(
        SECRET, hook.webhook_id, hook.headers["webhook-timestamp"], hook.body
    )
    for name in ("web", "worker", "triggers"):  # compose.yaml's health checks, run once
        podman("healthcheck", "run", f"{stack.prefix}-{name}")


def test_the_console_is_served_with_the_static_files_collected_in_the_image(stack):
    login = httpx.get(f"{stack.base_url}/admin/login/", timeout=10)
    assert login.status_code == 200
    stylesheets = re.findall(r'href="(/static/[^"]+\.css)"', login.text)
    assert stylesheets, login.text[:500]
    for path in stylesheets:  # hashed names: the manifest made at build time
        assert httpx.get(f"{stack.base_url}{path}", timeout=10).status_code == 200, path


def test_each_container_stops_on_sigterm_with_status_0_after_its_work_in_flight(
    stack, people, tmp_path
):
    """worker: a delivery in flight is finished; web: a held long-poll is answered; beat.
    `stop` sends SIGTERM and SIGKILLs after compose.yaml's stop_grace_period: status 0
    means each stopped by itself within it."""
    agent, reviewer = people["agent"], people["reviewer"]
    with WebhookReceiver(hold_first=1, hold_seconds=120) as slow:
        stack.manage("add_webhook", slow.url, "--events", "created", "--secret", SECRET)
        bp_id = create(agent, "Stop the worker")
        slow.wait_for(lambda got: len(got) == 1, timeout=60, what="a delivery in flight")
        stopped = in_background(lambda: stack.stop("worker"))
        wait_for(lambda: "Warm shutdown" in stack.logs("worker"), "the worker got SIGTERM")
        slow.release_held()
        assert stopped() == 0, stack.logs("worker")
    events = reviewer.get(f"/api/breakpoints/{bp_id}/events").json()["results"]
    outcomes = [
        e["metadata"]["outcome"]
        for e in events
        if e["type"] == "notification" and e["metadata"]["url"] == slow.url
    ]
    assert outcomes == ["delivered"]

    waiting_id = create(agent, "Stop the web server")
    wait_for(lambda: longpolls_open(stack) == 0, "no long-poll is held yet")
    waited = in_background(lambda: agent.get(f"/api/breakpoints/{waiting_id}/status?wait=8"))
    wait_for(lambda: longpolls_open(stack) >= 1, "a long-poll is held")
    stopped = in_background(lambda: stack.stop("web"))
    wait_for(lambda: "Handling signal: term" in stack.logs("web"), "web got SIGTERM")
    answer = waited()
    assert (answer.status_code, answer.json()["status"]) == (200, "waiting")
    assert stopped() == 0, stack.logs("web")

    assert stack.stop("beat") == 0, stack.logs("beat")


def documented_docker_runs() -> dict[str, list[str]]:
    """The `docker run` commands of docs/deploy.md's section on running without compose,
    by role (their last word)."""
    section = DEPLOY_DOC.read_text().split("## Run it with `docker run`")[1].split("\n## ")[0]
    commands = [
        shlex.split(line)
        for block in re.findall(r"```bash\n(.*?)```", section, flags=re.DOTALL)
        for line in block.replace("\\\n", " ").splitlines()
        if line.startswith("docker run ")
    ]
    return {words[-1]: words for words in commands}


def as_podman(words: list[str], *, image: str, env_file: Path, prefix: str) -> list[str]:
    """A documented `docker run` as podman runs it here: the test's image, .env, names and
    volume; the host's network (the port is PORT's) instead of `-p 127.0.0.1:8000:8000`,
    and the process limit this machine's podman needs (docs/deploy.md says when)."""
    assert words[:2] == ["docker", "run"] and words[-2] == "breakpoint-manager:latest", words
    replaced = {
        "--env-file": lambda value: str(env_file),
        "--name": lambda value: f"{prefix}-{value}",
        "-v": lambda value: f"{prefix}-{value}",
    }
    options, rest = [], iter(words[2:-2])
    for word in rest:
        if word in ("-d", "--rm"):
            options.append(word)
        elif word == "-p":
            assert next(rest) == "127.0.0.1:8000:8000"
        else:
            value = next(rest)
            options += [word, replaced.get(word, lambda kept: kept)(value)]
    extra = ["--network=host", "--ulimit", f"nproc={NPROC_LIMIT}:{NPROC_LIMIT}"]
    return ["run", *options, *extra, image, words[-1]]


def test_the_documented_docker_run_commands_run_every_role_on_your_own_databases(
    image, stack, tmp_path
):
    """docs/deploy.md's `docker run` lines, run with podman on a host allowing 4096 open
    files, against the PostgreSQL and Redis the stack migrated (as a managed database would
    be): migrate exits 0, web answers /readyz, each role starts, and none logs an ERROR."""
    runs = documented_docker_runs()
    assert list(runs) == ["migrate", "web", "worker", "triggers", "beat"]
    port = free_port()
    env_file = dotenv(tmp_path / ".env")
    with env_file.open("a") as env:  # where the databases are, as the section says
        env.write(f"DATABASE_URL={DATABASE_URL}\nREDIS_URL={REDIS_URL}\nPORT={port}\n")
    prefix = f"bpm-image-test-doc-{os.getpid()}"
    names = [f"{prefix}-bpm-{role}" for role in ("web", "worker", "triggers", "beat")]
    try:
        for role, words in runs.items():
            command = as_podman(words, image=image, env_file=env_file, prefix=prefix)
            ran = podman(*command, open_files=HOST_OPEN_FILES, check=False)
            assert ran.returncode == 0, f"{role}: {ran.stdout}{ran.stderr}"
            assert role != "migrate" or not error_lines(ran.stdout + ran.stderr), ran.stderr
        wait_for(lambda: ready_at(port), "the documented web container answers /readyz 200")
        for name, started in zip(names[1:], (" ready.", " ready.", "Starting"), strict=True):
            wait_for(lambda: started in container_log(name), f"{name} logs {started!r}")  # noqa: B023
        for name in names:
            log = container_log(name)
            assert error_lines(log) == [], f"{name}:\n{log}"
    finally:
        for name in names:
            podman("rm", "--force", "--time", "0", name, check=False)
        podman("volume", "rm", "--force", f"{prefix}-bpm-data", check=False)


def ready_at(port: int) -> bool:
    try:
        return httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=5).status_code == 200
    except httpx.HTTPError:
        return False


def container_log(name: str) -> str:
    result = podman("logs", name, check=False)
    return result.stdout + result.stderr

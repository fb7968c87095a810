"""Fixtures of the tests that start processes (every test here is `slow`, tests/conftest.py).

The whole system (tests/support/system.py) on the test database and a dedicated Redis:
`make_system` starts one for a single test (torn down before the database is flushed),
`module_system` one that a module's tests share. Each sub-folder's conftest says which
test database its tests need (`_integration_requirements`).
"""

import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from django.core.management.base import CommandError
from django.test import TransactionTestCase

from tests.support.system import (
    PROJECT_DIR,
    RedisServer,
    System,
    missing_requirement,
    running_system,
    start_system,
)

# How many times a test's flush is tried when PostgreSQL breaks a deadlock against it.
FLUSH_ATTEMPTS = 3


@pytest.fixture(scope="session", autouse=True)
def _flush_survives_a_deadlock() -> Iterator[None]:
    """A module's system keeps running while a test's rows are flushed: its beat sweeps
    every second, and a sweep's transaction (rows locked, then events written) can meet
    the flush's TRUNCATE of every table the other way round. PostgreSQL breaks such a
    deadlock by failing one side; when that is the flush (which then wrote nothing), it is
    tried again."""
    flush = TransactionTestCase._fixture_teardown

    def teardown(self: TransactionTestCase) -> None:
        for attempt in range(1, FLUSH_ATTEMPTS + 1):
            try:
                return flush(self)
            except CommandError as exc:
                if attempt == FLUSH_ATTEMPTS or not _deadlocked(exc):
                    raise

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(TransactionTestCase, "_fixture_teardown", teardown)
        yield


def _deadlocked(exc: BaseException | None) -> bool:
    while exc is not None:
        if isinstance(exc, psycopg.errors.DeadlockDetected):
            return True
        exc = exc.__cause__ or exc.__context__
    return False


@pytest.fixture(scope="module")
def _integration_requirements() -> None:
    """Skip (with the reason) when the system cannot run here; sub-folders may relax it."""
    reason = missing_requirement()
    if reason:
        pytest.skip(reason)


@pytest.fixture(scope="module")
def redis_server(tmp_path_factory, _integration_requirements) -> Iterator[RedisServer]:
    server = RedisServer(tmp_path_factory.mktemp("redis"))
    try:
        server.start()
        yield server
    finally:
        server.process.stop()


@pytest.fixture(scope="session")
def static_root(tmp_path_factory) -> Path:
    """collectstatic, once, as the production release step does (the console needs it)."""
    root = tmp_path_factory.mktemp("static")
    result = subprocess.run(
        [sys.executable, "manage.py", "collectstatic", "--noinput", "-v0"],
        cwd=PROJECT_DIR,
        env={**os.environ, "DEBUG": "0", "STATIC_ROOT": str(root)},
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert result.returncode == 0, result.stderr
    return root


@pytest.fixture
def make_system(
    transactional_db, redis_server, tmp_path, static_root
) -> Iterator[Callable[..., System]]:
    """Start a system for this test alone (torn down before the test database is flushed)."""
    started: list[System] = []

    def make(**options) -> System:
        system = start_system(redis_server, tmp_path, static_root, **options)
        started.append(system)
        return system

    try:
        yield make
    finally:
        for system in started:
            system.stop()


@pytest.fixture(scope="module")
def module_system_options() -> dict[str, Any]:
    """module_system's options (make_system's keyword arguments); a conftest may override."""
    return {}


@pytest.fixture(scope="module")
def module_system(
    django_db_setup, tmp_path_factory, static_root, module_system_options, _integration_requirements
) -> Iterator[System]:
    """One system for all the tests of a module. For tests that only read or create their
    own data: each test's rows are flushed after it, the processes stay."""
    with running_system(tmp_path_factory, static_root, **module_system_options) as system:
        yield system

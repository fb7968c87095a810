"""Fixtures of the agent side's tests that need no live system."""

from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.scripted import Answer, ScriptedServer


@pytest.fixture
def scripted() -> Iterator[Any]:
    """scripted(*answers) -> a started ScriptedServer; all are stopped after the test."""
    servers: list[ScriptedServer] = []

    def start(*answers: Answer) -> ScriptedServer:
        server = ScriptedServer(list(answers)).__enter__()
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.__exit__(None, None, None)

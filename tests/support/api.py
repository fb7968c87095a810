"""The API from the tests' side: its answers checked, and an agent calling a live server."""

from datetime import datetime

import httpx

from accounts.tokens import token_create_for_agent


def assert_error(response, status: int, code: str = "validation_error") -> dict:
    """The answer is `status` with the contract's error envelope and this code; its error."""
    assert response.status_code == status, response.content
    error = response.json()["error"]
    assert set(error) == {"code", "message", "details"}
    assert error["code"] == code
    assert isinstance(error["message"], str) and error["message"]
    assert isinstance(error["details"], dict)
    return error


def parse_time(value: str) -> datetime:
    """A contract timestamp ("...Z") as an aware datetime."""
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


class Agent:
    """The agent's side: its own token, plain HTTP against the live server."""

    def __init__(self, base_url: str, agent_id: str = "agent-7"):
        _, raw = token_create_for_agent(agent_id=agent_id)
        self.http = httpx.Client(
            base_url=base_url, headers={"Authorization": f"Bearer {raw}"}, timeout=10
        )

    def post(self, **body) -> str:
        response = self.http.post("/api/breakpoints", json=body)
        assert response.status_code == 201, response.text
        return response.json()["breakpointId"]

    def status(self, breakpoint_id: str) -> dict:
        response = self.http.get(f"/api/breakpoints/{breakpoint_id}/status")
        assert response.status_code == 200, response.text
        return response.json()

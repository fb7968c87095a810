"""Checking the API's answers."""

from datetime import datetime


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

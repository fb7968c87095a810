"""Single sign-on half configured refuses to start, saying what is missing."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def check(**env: str) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if not k.startswith("BPM_OIDC_")}
    return subprocess.run(
        [sys.executable, "manage.py", "check"],
        cwd=ROOT,
        env={**base, **env},
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize(
    ("env", "message"),
    [
        (
            {"BPM_OIDC_ISSUER": "https://idp.example", "BPM_OIDC_REVIEWER_GROUPS": "r"},
            "BPM_OIDC_CLIENT_ID",
        ),
        (
            {"BPM_OIDC_ISSUER": "https://idp.example", "BPM_OIDC_CLIENT_ID": "c"},
            "BPM_OIDC_REVIEWER_GROUPS",
        ),
        ({"BPM_OIDC_ONLY": "1"}, "BPM_OIDC_ONLY=1 needs single sign-on"),
        (
            {"BPM_OIDC_TOKEN_AUTH_METHOD": "basic"},
            "BPM_OIDC_TOKEN_AUTH_METHOD must be client_secret_post (the default) or "
            "client_secret_basic",
        ),
    ],
    ids=["no-client", "no-groups", "only-without-issuer", "unknown-token-auth-method"],
)
def test_half_configured_single_sign_on_refuses_to_start(env, message):
    result = check(**env)
    assert result.returncode != 0
    assert message in result.stderr


def test_configured_single_sign_on_starts():
    result = check(
        BPM_OIDC_ISSUER="https://idp.example",
        BPM_OIDC_CLIENT_ID="c",
        BPM_OIDC_ADMIN_GROUPS="a",
        BPM_OIDC_ONLY="1",
    )
    assert result.returncode == 0, result.stderr


def test_the_env_example_names_what_a_setup_needs_with_the_defaults(settings):
    """.env.example (copied to .env for compose) lists the settings a first setup sets,
    each with the value the service uses when it is left out."""
    lines = (ROOT / ".env.example").read_text().splitlines()
    example = dict(line.split("=", 1) for line in lines if line.startswith("BPM_OIDC_"))
    needed = ["ISSUER", "CLIENT_ID", "CLIENT_SECRET", "TOKEN_AUTH_METHOD", "SCOPES"]
    needed += ["GROUPS_CLAIM", "REVIEWER_GROUPS", "ADMIN_GROUPS", "EXPERT_GROUPS"]

    assert {f"BPM_OIDC_{name}" for name in needed} <= set(example)
    for name in ("TOKEN_AUTH_METHOD", "SCOPES", "GROUPS_CLAIM"):
        assert example[f"BPM_OIDC_{name}"] == getattr(settings, f"BPM_OIDC_{name}")

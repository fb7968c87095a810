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
    ],
    ids=["no-client", "no-groups", "only-without-issuer"],
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

"""The project's own packages, as pyproject.toml's import-linter contracts name them (one
list for the structure and docs checks; the server's packages, not the agent SDK)."""

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SDK_PACKAGE = "bpm_client"

APP_PACKAGES: tuple[str, ...] = tuple(
    package
    for package in tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"][
        "root_packages"
    ]
    if package != SDK_PACKAGE
)

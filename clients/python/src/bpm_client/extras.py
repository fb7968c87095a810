"""How to install one of bpm-client's optional extras (`mcp`, `watch`, `langgraph`,
`openai-agents`) where bpm runs.

bpm-client is on no package index: it installs from the project's folder. The command is
pip's, or, in a virtualenv that has no pip but uv (the `.venv` that `make run` makes), uv's.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path


def _shown(path: Path) -> str:
    """`path` as a person types it: relative to the current folder when inside it."""
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def install_command(extra: str) -> str:
    """The command that installs `extra` into the environment running bpm: pip's, or, in a
    virtualenv that has no pip but uv (the `.venv` that `make run` makes), uv's."""
    requirement = f"'./clients/python[{extra}]'"
    if importlib.util.find_spec("pip") is None:
        uv = Path(sys.prefix) / "bin" / "uv"
        if os.access(uv, os.X_OK):
            python = Path(sys.prefix) / "bin" / "python"
            return f"{_shown(uv)} pip install --python {_shown(python)} {requirement}"
    return f"pip install {requirement}"


def require_extra(error: ImportError, *, extra: str, packages: tuple[str, ...]) -> None:
    """Raise an ImportError naming the extra to install when `error` is one of `packages`
    missing (the adapters for agent frameworks import them first thing); anything else
    (a broken install of one of them) is left to the caller to re-raise."""
    top = (error.name or "").partition(".")[0]
    if top in packages:
        raise ImportError(
            f"bpm_client.{extra.replace('-', '_')} needs {top}, from the `{extra}` extra: "
            f"{install_command(extra)} (in the project's folder)",
            name=error.name,
        ) from error

"""Generate the TypeScript SDK's API types from the OpenAPI schema (openapi-typescript).

`make typescript-types` writes clients/typescript/src/schema.ts; the drift test
(tests/clients/test_typescript_types.py) writes a temporary file and compares it with that
one. Both run this module, so both generate the same way: the schema as `manage.py
spectacular` writes it, then openapi-typescript (pinned in clients/typescript's lockfile,
installed with `npm ci` when missing). Standard library only; any problem ends in one line.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

PROJECT_DIR = Path(__file__).resolve().parents[1]
PACKAGE_DIR = PROJECT_DIR / "clients" / "typescript"
SCHEMA_TS = PACKAGE_DIR / "src" / "schema.ts"
GENERATOR = PACKAGE_DIR / "node_modules" / ".bin" / "openapi-typescript"
NPM_CI = ["npm", "ci", "--ignore-scripts", "--no-audit", "--no-fund"]
# Request bodies keep their optional fields optional (a default is the server's, not a
# value the caller must send).
GENERATOR_OPTIONS = ["--default-non-nullable=false"]


class GenerationFailed(Exception):
    """Why the types could not be generated, in one line for a person."""


def install_generator() -> Path:
    """openapi-typescript from the package's lockfile (`npm ci` when node_modules lacks it)."""
    if GENERATOR.exists():
        return GENERATOR
    if shutil.which("npm") is None:
        raise GenerationFailed("node and npm are needed to generate the TypeScript types")
    done = subprocess.run(NPM_CI, cwd=PACKAGE_DIR, capture_output=True, text=True)
    if done.returncode != 0:
        raise GenerationFailed(f"npm ci in {PACKAGE_DIR} failed: {done.stderr.strip()[-2000:]}")
    return GENERATOR


def write_schema(into: Path) -> None:
    """The OpenAPI schema as `manage.py spectacular` writes it (validated)."""
    env = {**os.environ, "DEBUG": os.environ.get("DEBUG", "0")}
    env.setdefault("SECRET_KEY", "insecure-schema-only-key")
    done = subprocess.run(
        [sys.executable, "manage.py", "spectacular", "--validate", "--file", str(into)],
        cwd=PROJECT_DIR,
        env=env,
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        raise GenerationFailed(f"manage.py spectacular failed: {done.stderr.strip()[-2000:]}")


def generate(output: Path) -> None:
    """Write the TypeScript types of the current schema to `output`."""
    generator = install_generator()
    with tempfile.TemporaryDirectory() as folder:
        schema = Path(folder) / "openapi.yml"
        write_schema(schema)
        done = subprocess.run(
            [str(generator), str(schema), *GENERATOR_OPTIONS, "--output", str(output)],
            cwd=PACKAGE_DIR,
            capture_output=True,
            text=True,
        )
    if done.returncode != 0:
        raise GenerationFailed(f"openapi-typescript failed: {done.stderr.strip()[-2000:]}")


def main(argv: list[str]) -> int:
    output = Path(argv[0]) if argv else SCHEMA_TS
    try:
        generate(output.resolve())
    except GenerationFailed as problem:
        print(f"typescript-types: {problem}", file=sys.stderr)
        return 1
    print(f"typescript-types: wrote {output}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""The TypeScript SDK's API types (clients/typescript/src/schema.ts) are what the server's
OpenAPI schema generates: `make typescript-types` after an API change, then commit."""

import pytest

from devtools.typescript_types import SCHEMA_TS, generate
from tests.support.typescript import install_packages

# It runs manage.py and node: not part of `make test-fast`.
pytestmark = pytest.mark.slow


def test_generated_types_match_the_api_schema(tmp_path):
    install_packages()
    fresh = tmp_path / "schema.ts"
    generate(fresh)
    assert fresh.read_text() == SCHEMA_TS.read_text(), (
        "clients/typescript/src/schema.ts is out of date: run `make typescript-types` and commit it"
    )

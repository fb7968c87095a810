"""`bpm verify RECEIPT --breakpoint ID`: check a signed receipt of that breakpoint offline,
against a pinned JWKS or the server's (and, with --values FILE, that it approved exactly
those values). Exit 0 valid (its claims printed as JSON), 1 invalid (or another
breakpoint's, or other values), 4 error."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, NoReturn

import click

from ..receipts import (
    JWKS_PATH,
    JwksUnavailable,
    ReceiptInvalid,
    load_jwks,
    values_digest,
    verify_receipt,
)
from .app import Settings
from .failures import CliError

VALID = 0
INVALID = 1


@click.command(epilog="Exit codes: 0 valid, 1 invalid, 4 error (no JWKS, bad usage).")
@click.argument("receipt")
@click.option(
    "--breakpoint",
    "breakpoint_id",
    required=True,
    metavar="ID",
    help="The breakpoint the receipt must be for (another breakpoint's receipt is invalid).",
)
@click.option(
    "--jwks",
    "jwks_source",
    metavar="FILE|URL",
    help=f"The keys to trust (a JWKS file or URL); default: the server's {JWKS_PATH}.",
)
@click.option(
    "--values",
    "values_file",
    metavar="FILE",
    type=click.Path(dir_okay=False, path_type=Path),
    help="A JSON file of the values you hold (a result's `values`): the receipt must have "
    "approved exactly these (its valuesDigest).",
)
@click.pass_context
def verify(
    ctx: click.Context,
    receipt: str,
    breakpoint_id: str,
    jwks_source: str | None,
    values_file: Path | None,
) -> None:
    """Verify RECEIPT (a result's `receipt`; - reads it from stdin) as breakpoint ID's and
    print its claims."""
    values = _values(values_file) if values_file is not None else None
    if receipt == "-":
        receipt = sys.stdin.read()
    receipt = receipt.strip()
    settings = ctx.find_object(Settings)
    source = jwks_source or (settings.url.rstrip("/") + JWKS_PATH if settings else None)
    if not source:
        raise CliError("no JWKS: pass --jwks FILE|URL or --url")
    try:
        claims = verify_receipt(receipt, load_jwks(source))
    except JwksUnavailable as error:
        raise CliError(str(error)) from error
    except ReceiptInvalid as error:
        invalid(ctx, str(error))
    if claims["breakpointId"] != breakpoint_id:
        invalid(ctx, f"it is breakpoint {claims['breakpointId']}'s receipt, not {breakpoint_id}'s")
    if values_file is not None and claims.get("valuesDigest") != values_digest(values):
        invalid(ctx, f"it did not approve the values in {values_file} (valuesDigest differs)")
    click.echo(json.dumps(claims, indent=2, sort_keys=True))
    ctx.exit(VALID)


def invalid(ctx: click.Context, reason: str) -> NoReturn:
    click.echo(f"bpm: invalid receipt: {reason}", err=True)
    ctx.exit(INVALID)


def _values(path: Path) -> Any:
    """The values of a JSON file (`null` for none)."""
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError) as error:
        raise CliError(f"cannot read values from {path}: {error}") from error

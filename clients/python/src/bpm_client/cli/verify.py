"""`bpm verify RECEIPT`: check a signed receipt offline, against a pinned JWKS or the
server's. Exit 0 valid (its claims printed as JSON), 1 invalid, 4 error."""

from __future__ import annotations

import json
import sys

import click

from ..receipts import JWKS_PATH, JwksUnavailable, ReceiptInvalid, load_jwks, verify_receipt
from .app import Settings
from .failures import CliError

VALID = 0
INVALID = 1


@click.command(epilog="Exit codes: 0 valid, 1 invalid, 4 error (no JWKS, bad usage).")
@click.argument("receipt")
@click.option(
    "--jwks",
    "jwks_source",
    metavar="FILE|URL",
    help=f"The keys to trust (a JWKS file or URL); default: the server's {JWKS_PATH}.",
)
@click.pass_context
def verify(ctx: click.Context, receipt: str, jwks_source: str | None) -> None:
    """Verify RECEIPT (a result's `receipt`; - reads it from stdin) and print its claims."""
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
        click.echo(f"bpm: invalid receipt: {error}", err=True)
        ctx.exit(INVALID)
    click.echo(json.dumps(claims, indent=2, sort_keys=True))
    ctx.exit(VALID)

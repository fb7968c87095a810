"""`bpm verify RECEIPT --breakpoint ID`: check a signed receipt of that breakpoint offline,
against a pinned JWKS or the server's (and, with --values FILE, that it approved exactly
those values). Exit 0 a genuine approval (its claims printed as JSON), 1 invalid (or
another breakpoint's, or other values) or a genuine receipt of anything but an approval (a
rejection, an expiry: its claims printed too) unless --any-decision, 4 error."""

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
    ValuesNotRepresentable,
    load_jwks,
    values_digest,
    verify_receipt,
)
from .app import Settings
from .failures import CliError

VALID = 0
INVALID = 1
NOT_APPROVED = 1  # genuine, but a rejection or an expiry: a script's `&&` must not go on


@click.command(
    epilog="Exit codes: 0 a genuine approval (with --any-decision: any genuine receipt), "
    "1 invalid, or not an approval, 4 error (no JWKS, bad usage)."
)
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
@click.option(
    "--any-decision",
    is_flag=True,
    help="Exit 0 for any genuine receipt of the breakpoint (a rejection, an expiry); "
    "without it only an approval (approved: true) exits 0.",
)
@click.pass_context
def verify(
    ctx: click.Context,
    receipt: str,
    breakpoint_id: str,
    jwks_source: str | None,
    values_file: Path | None,
    any_decision: bool,
) -> None:
    """Verify RECEIPT (a result's `receipt`; - reads it from stdin) as breakpoint ID's and
    print its claims; it succeeds only for an approval unless --any-decision."""
    values = _values(values_file) if values_file is not None else None
    digest = _digest(values, values_file) if values_file is not None else None
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
    if values_file is not None and claims.get("valuesDigest") != digest:
        invalid(ctx, f"it did not approve the values in {values_file} (valuesDigest differs)")
    click.echo(json.dumps(claims, indent=2, sort_keys=True))
    if claims.get("approved") is not True and not any_decision:
        click.echo(
            f"bpm: a genuine receipt, but not an approval (status {claims.get('status')}, "
            "approved: false); --any-decision accepts any decision",
            err=True,
        )
        ctx.exit(NOT_APPROVED)
    ctx.exit(VALID)


def invalid(ctx: click.Context, reason: str) -> NoReturn:
    click.echo(f"bpm: invalid receipt: {reason}", err=True)
    ctx.exit(INVALID)


def _digest(values: Any, path: Path) -> str | None:
    """The valuesDigest of the values in `path`; a CliError when none can be computed."""
    try:
        return values_digest(values)
    except ValuesNotRepresentable as error:
        raise CliError(f"{path}: {error}") from error


def _values(path: Path) -> Any:
    """The values of a JSON file (`null` for none)."""
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError) as error:
        raise CliError(f"cannot read values from {path}: {error}") from error

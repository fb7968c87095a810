"""The service's receipt keys, from settings: the first signs, every one verifies.

BPM_RECEIPT_KEYS is a JSON list of private Ed25519 JWKs with a kid (`manage.py
generate_receipt_key` prints one), or the path of a file holding that list. Rotation: put
the new key first and keep the old ones after it, so receipts they signed still verify.
Unset, the service keeps one key of its own in its data directory
(BPM_VAR_DIR/receipt-keys.json, made on first use), so `make run` signs out of the box.
"""

import json
import os
from functools import lru_cache
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from core import receipts
from core.receipts import ReceiptError, ReceiptKey

LOCAL_KEYS_FILE = "receipt-keys.json"


def receipt_keys() -> list[ReceiptKey]:
    """The configured keys, signing key first (read once per configuration)."""
    return _loaded(settings.BPM_RECEIPT_KEYS.strip(), str(settings.VAR_DIR))


def signing_key() -> ReceiptKey:
    return receipt_keys()[0]


def published_jwks() -> dict[str, Any]:
    """The public half of every configured key, as /.well-known/jwks.json serves it."""
    return receipts.jwks(receipt_keys())


@lru_cache(maxsize=4)
def _loaded(configured: str, var_dir: str) -> list[ReceiptKey]:
    if not configured:
        text = _local_keys(Path(var_dir) / LOCAL_KEYS_FILE)
    elif configured.startswith("["):
        text = configured
    else:
        try:
            text = Path(configured).read_text()
        except OSError as exc:
            raise ImproperlyConfigured(
                f"BPM_RECEIPT_KEYS: cannot read {configured}: {exc}"
            ) from exc
    try:
        entries = json.loads(text)
        if not isinstance(entries, list) or not entries:
            raise ReceiptError("BPM_RECEIPT_KEYS must be a non-empty JSON list of keys.")
        keys = [receipts.key_from_entry(entry) for entry in entries]
    except (ValueError, ReceiptError) as exc:
        raise ImproperlyConfigured(f"BPM_RECEIPT_KEYS: {exc}") from exc
    if len({key.kid for key in keys}) != len(keys):
        raise ImproperlyConfigured("BPM_RECEIPT_KEYS: two keys share a kid.")
    return keys


def _local_keys(path: Path) -> str:
    """The data directory's own key list, made once (atomically: the first process to
    link its file in wins, the others read it)."""
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        draft = path.with_name(f".{path.name}.{os.getpid()}")
        draft.write_text(json.dumps([receipts.key_generate()]))
        draft.chmod(0o600)
        try:
            os.link(draft, path)
        except FileExistsError:
            pass
        finally:
            draft.unlink()
    return path.read_text()

"""Draw the console's home-screen icons (console/static/reviews/icons/) as PNG files.

The favicon's picture, a yellow disc on the admin's blue: a rounded square with clear
corners for the manifest's "any" icons; the whole square for the maskable icon and the
apple-touch-icon, whose corners the phone cuts itself (the disc stays inside the maskable
safe zone, the middle 80%). Standard library only (zlib, struct); the PNGs are committed,
so run `.venv/bin/python -m devtools.console_icons` again only to change them.
"""

from __future__ import annotations

import math
import struct
import zlib
from pathlib import Path

ICONS_DIR = Path(__file__).resolve().parents[1] / "console" / "static" / "reviews" / "icons"
BLUE = (0x41, 0x76, 0x90)  # the admin's header
YELLOW = (0xF5, 0xB8, 0x3D)  # the waiting badge
CORNER = 7 / 32  # the favicon's corner radius, as a share of its side
DISC = 8 / 32  # the favicon's disc radius, as a share of its side
# name: (side in px, rounded corners)
ICONS = {
    "icon-192.png": (192, True),
    "icon-512.png": (512, True),
    "icon-maskable-512.png": (512, False),
    "apple-touch-icon.png": (180, False),
}


def _coverage(distance: float) -> float:
    """How much of a pixel lies inside a shape whose edge is `distance` px outside its centre."""
    return min(1.0, max(0.0, 0.5 - distance))


def _rounded_square(x: float, y: float, side: int, radius: float) -> float:
    """The signed distance (negative inside) from (x, y) to the square's rounded edge."""
    half = side / 2
    qx = abs(x - half) - (half - radius)
    qy = abs(y - half) - (half - radius)
    outside = math.hypot(max(qx, 0.0), max(qy, 0.0))
    return outside + min(max(qx, qy), 0.0) - radius


def pixels(side: int, rounded: bool) -> bytes:
    """The icon's rows as PNG scanlines: RGBA, each row after its filter byte (0, none)."""
    radius = side * CORNER if rounded else 0.0
    disc = side * DISC
    rows = bytearray()
    for row in range(side):
        rows.append(0)
        y = row + 0.5
        for column in range(side):
            x = column + 0.5
            square = _coverage(_rounded_square(x, y, side, radius))
            inside = _coverage(math.hypot(x - side / 2, y - side / 2) - disc)
            rgb = (round(b + (f - b) * inside) for b, f in zip(BLUE, YELLOW, strict=True))
            rows.extend((*rgb, round(255 * square)))
    return bytes(rows)


def png(side: int, scanlines: bytes) -> bytes:
    """A PNG file: 8-bit RGBA, `side` px square."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    header = struct.pack(">IIBBBBB", side, side, 8, 6, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(scanlines, 9))
        + chunk(b"IEND", b"")
    )


def main() -> None:
    ICONS_DIR.mkdir(parents=True, exist_ok=True)
    for name, (side, rounded) in ICONS.items():
        (ICONS_DIR / name).write_bytes(png(side, pixels(side, rounded)))
        print(f"{ICONS_DIR / name}: {side}x{side}")


if __name__ == "__main__":
    main()

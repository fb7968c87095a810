"""The console's web app manifest: what a phone needs to install the console on its home
screen (name, icons, the queue to open on, standalone).

Served to anyone: browsers fetch a manifest without the session's cookie. Installing
keeps nothing for offline use: the console's pages answer `Cache-Control: no-store` (the
admin's admin_view), so a decision form is always the current one.
"""

from typing import Any

from django.http import HttpRequest, JsonResponse
from django.templatetags.static import static
from django.views.decorators.cache import cache_control
from django.views.decorators.http import require_safe

THEME_COLOR = "#417690"  # the admin's header, as the icons' background
BACKGROUND_COLOR = "#ffffff"  # the admin's page, shown while the console starts
ICONS = [  # (static path, side in px, purpose), drawn by devtools/console_icons.py
    ("reviews/icons/icon-192.png", 192, "any"),
    ("reviews/icons/icon-512.png", 512, "any"),
    ("reviews/icons/icon-maskable-512.png", 512, "maskable"),
]
CONTENT_TYPE = "application/manifest+json"


def manifest(*, scope: str, start_url: str) -> dict[str, Any]:
    """The manifest of a console under `scope` that opens on `start_url` (the queue)."""
    return {
        "id": scope,
        "name": "Breakpoint Manager",
        "short_name": "Breakpoints",
        "description": "Review and decide what your agents ask.",
        "start_url": start_url,
        "scope": scope,
        "display": "standalone",
        "theme_color": THEME_COLOR,
        "background_color": BACKGROUND_COLOR,
        "icons": [
            {
                "src": static(path),
                "sizes": f"{side}x{side}",
                "type": "image/png",
                "purpose": purpose,
            }
            for path, side, purpose in ICONS
        ],
    }


@require_safe
@cache_control(max_age=3600)
def manifest_view(request: HttpRequest, *, scope: str, start_url: str) -> JsonResponse:
    return JsonResponse(manifest(scope=scope, start_url=start_url), content_type=CONTENT_TYPE)

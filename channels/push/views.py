"""What the console's Devices page calls: the service worker that shows pushes, and the
endpoint that saves or removes this browser's subscription.

The service worker only shows notifications and opens the review page when one is
tapped: it handles no fetch, so no console page, and no decision form, is ever served
from a cache. It is scoped to /push/, so it controls no console page either.

/push/devices takes JSON from a signed-in reviewer's browser (the session, and Django's
CSRF check as for any POST): POST saves {endpoint, keys}, DELETE removes {endpoint}.
Refusals answer in the API's error envelope.
"""

import json
from typing import Any

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_http_methods

from channels.push import subscriptions
from core.exceptions import DomainError
from web.errors import error_response, http_status

# A subscription is a few hundred bytes; a label is a user agent.
MAX_DEVICE_BODY_BYTES = 8 * 1024

SERVICE_WORKER = """\
// Breakpoint Manager: shows a reviewer's push notifications; a tap opens the review page.
// It handles no fetch: nothing of the console is cached or served offline.
self.addEventListener("push", (event) => {
  let notice = {};
  try {
    notice = event.data ? event.data.json() : {};
  } catch (error) {
    notice = {};
  }
  const title = notice.outcome ? `${notice.outcome}: ${notice.title || ""}` : (notice.title || "Breakpoint");
  const parts = [];
  if (notice.agent) parts.push(`agent ${notice.agent}`);
  if (typeof notice.secondsLeft === "number") {
    const minutes = Math.max(0, Math.round(notice.secondsLeft / 60));
    parts.push(minutes >= 120 ? `${Math.round(minutes / 60)} h left` : `${minutes} min left`);
  }
  if (notice.event === "reminder") parts.push("reminder");
  if (notice.event === "escalated") parts.push("escalated to you");
  event.waitUntil(
    self.registration.showNotification(title, {
      body: parts.join(" · "),
      tag: notice.tag || undefined,
      renotify: !notice.outcome,
      silent: Boolean(notice.outcome),
      data: { url: notice.url || "/admin/" },
    }),
  );
});

self.addEventListener("notificationclick", (event) => {
  event.notification.close();
  const url = new URL(event.notification.data.url, self.location.origin);
  if (url.origin !== self.location.origin) return;
  event.waitUntil(self.clients.openWindow(url.href));
});
"""


@never_cache
@require_http_methods(["GET", "HEAD"])
def service_worker(request: HttpRequest) -> HttpResponse:
    return HttpResponse(SERVICE_WORKER, content_type="text/javascript; charset=utf-8")


@never_cache
@require_http_methods(["POST", "DELETE"])
def devices(request: HttpRequest) -> HttpResponse:
    if not request.user.is_authenticated:
        return error_response(401, "not_authenticated", "Sign in to the console first.")
    if len(request.body) > MAX_DEVICE_BODY_BYTES:
        return error_response(413, "payload_too_large", "A subscription is a small object.")
    try:
        data: Any = json.loads(request.body or b"null")
    except (ValueError, UnicodeDecodeError):
        return error_response(400, "validation_error", "The body must be JSON.")
    if not isinstance(data, dict):
        return error_response(400, "validation_error", "The body must be a JSON object.")
    try:
        if request.method == "DELETE":
            removed = subscriptions.subscription_remove(
                user=request.user, endpoint=data.get("endpoint")
            )
            return JsonResponse({"removed": removed})
        label = request.headers.get("User-Agent", "")
        device = subscriptions.subscription_save(
            user=request.user, data=data.get("subscription", data), label=label
        )
    except DomainError as exc:
        return error_response(http_status(exc), exc.code, exc.message, exc.details)
    return JsonResponse({"id": device.pk, "label": device.label}, status=201)

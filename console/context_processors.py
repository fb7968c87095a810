"""Template context for every console page: the number of waiting breakpoints, and the
reviewer's Devices page when push notifications are on."""

from typing import Any

from django.conf import settings
from django.http import HttpRequest
from django.urls import reverse
from django.utils.functional import SimpleLazyObject

from breakpoints.models import Breakpoint
from core.actors import is_reviewer
from core.choices import Status

# The badge counts up to this many; beyond, it says "1,000+" (every page shows it, so it
# must not count a fleet's whole backlog each time).
WAITING_BADGE_CAP = 1_000


def _waiting_count() -> int | str:
    # One capped COUNT over the bp_waiting_created partial index, at most once a page;
    # overdue rows are not counted (the API no longer calls them waiting either).
    waiting = Breakpoint.objects.waiting().order_by().values("pk")
    count = waiting[: WAITING_BADGE_CAP + 1].count()
    return f"{WAITING_BADGE_CAP:,}+" if count > WAITING_BADGE_CAP else count


def console(request: HttpRequest) -> dict[str, Any]:
    """`waiting_count` for reviewers and admins on console (/admin/) pages, lazily."""
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated or not getattr(user, "is_staff", False):
        return {}
    if not request.path.startswith(reverse("admin:index")) or not is_reviewer(user):
        return {}
    return {
        # The reviewer's Devices page (push notifications), when push is on.
        "push_devices_url": (
            reverse("admin:channels_pushsubscription_changelist")
            if settings.BPM_VAPID_PRIVATE_KEY
            else ""
        ),
        "waiting_count": SimpleLazyObject(_waiting_count),
        "waiting_queue_url": reverse("admin:breakpoints_breakpoint_changelist")
        + f"?status__exact={Status.WAITING}",
    }

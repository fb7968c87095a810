"""Template context for every console page: the number of waiting breakpoints."""

from typing import Any

from django.http import HttpRequest
from django.urls import reverse
from django.utils.functional import SimpleLazyObject

from breakpoints.actors import is_reviewer
from breakpoints.choices import Status
from breakpoints.models import Breakpoint


def _waiting_count() -> int:
    # One indexed COUNT (status leads the bp_status_created index), at most once a page.
    return Breakpoint.objects.filter(status=Status.WAITING).count()


def console(request: HttpRequest) -> dict[str, Any]:
    """`waiting_count` for reviewers and admins on console (/admin/) pages, lazily."""
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated or not getattr(user, "is_staff", False):
        return {}
    if not request.path.startswith(reverse("admin:index")) or not is_reviewer(user):
        return {}
    return {
        "waiting_count": SimpleLazyObject(_waiting_count),
        "waiting_queue_url": reverse("admin:breakpoints_breakpoint_changelist")
        + f"?status__exact={Status.WAITING}",
    }

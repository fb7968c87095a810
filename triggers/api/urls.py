"""API routes of the triggers app (mounted under /api/); every path but the senders'
works with and without a trailing slash.

/api/events (GET, the list) is matched before /api/events/{ref}, whose GET reads an
event by id (admins) and whose POST receives a sender's event (triggers.api.events).
"""

from django.urls import re_path
from rest_framework.routers import SimpleRouter

from triggers.api.events import EventListView, EventView
from triggers.api.rules import TriggerRuleViewSet
from triggers.api.sources import EventSourceViewSet

router = SimpleRouter()
router.trailing_slash = "/?"  # the constructor only takes a boolean
router.register("event-sources", EventSourceViewSet, basename="event-source")
router.register("triggers", TriggerRuleViewSet, basename="trigger")

urlpatterns = [
    re_path(r"^events/?$", EventListView.as_view(), name="event-list"),
    # No NUL (a PostgreSQL text column cannot hold one): such a path is simply not found.
    re_path(r"^events/(?P<ref>[^/\x00]+)/?$", EventView.as_view(), name="event-ingest"),
    *router.urls,
]

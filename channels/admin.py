"""A reviewer's devices in the console: the ones on which they turned on push
notifications (each reviewer sees and removes their own, admins too), and on the same page
the switch for the browser they are using (channels/push)."""

from typing import Any

from django.conf import settings
from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest
from django.urls import reverse

from channels.models import PushSubscription
from channels.push import subscriptions
from channels.push.messages import vapid_public_key
from core.actors import is_reviewer


@admin.register(PushSubscription)
class PushSubscriptionAdmin(admin.ModelAdmin):
    list_display = ("label_display", "service", "created_at", "last_sent_at")
    list_display_links = None
    fields = ("label", "service", "created_at", "last_sent_at")
    readonly_fields = fields
    actions = ["delete_selected"]
    show_full_result_count = False
    show_facets = admin.ShowFacets.NEVER

    def has_module_permission(self, request: HttpRequest) -> bool:
        return is_reviewer(request.user)

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return is_reviewer(request.user) and (obj is None or obj.user_id == request.user.pk)

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return self.has_view_permission(request, obj)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # a browser adds itself, from this page's switch

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def get_queryset(self, request: HttpRequest) -> QuerySet[PushSubscription]:
        if not is_reviewer(request.user):
            return PushSubscription.objects.none()
        return subscriptions.subscriptions_of(request.user)

    def changelist_view(self, request: HttpRequest, extra_context: dict | None = None):
        context = {
            "title": "Your devices",
            "push_on": bool(settings.BPM_VAPID_PRIVATE_KEY),
            "push_public_key": vapid_public_key(),
            "push_service_worker_url": reverse("push-service-worker"),
            "push_devices_endpoint": reverse("push-devices"),
            **(extra_context or {}),
        }
        return super().changelist_view(request, context)

    @admin.display(description="Device", ordering="label")
    def label_display(self, device: PushSubscription) -> str:
        return device.label or f"Device {device.pk}"

    @admin.display(description="Push service")
    def service(self, device: PushSubscription) -> str:
        return device.endpoint.split("/")[2] if device.endpoint.count("/") >= 2 else ""

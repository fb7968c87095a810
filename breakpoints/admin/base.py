"""What the admin-only screens of the breakpoints app share: access, and service forms."""

from typing import Any

from django import forms
from django.http import HttpRequest

from breakpoints.actors import is_admin, is_reviewer
from config.exceptions import DomainError


class AdminOnly:
    """Tokens, webhooks, deliveries and rules are for admins alone (roles, not grants)."""

    def has_module_permission(self, request: HttpRequest) -> bool:
        return is_admin(request.user)

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return is_admin(request.user)


class ReviewerReadOnly:
    """Records reviewers read and nobody edits by hand (feedback, audit events)."""

    def has_module_permission(self, request: HttpRequest) -> bool:
        return is_reviewer(request.user)

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return is_reviewer(request.user)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


def add_service_error(form: forms.Form, exc: DomainError) -> None:
    """A service's refusal as form errors: on the fields its details name, else the form's."""
    details = exc.details if isinstance(exc.details, dict) else {}
    placed = False
    for name, messages in details.items():
        if name in form.fields and isinstance(messages, list):
            for message in messages:
                form.add_error(name, str(message))
            placed = True
    if not placed:
        form.add_error(None, exc.message)

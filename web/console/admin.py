"""The console's toolkit for every app's admin screens: who may see them (AdminOnly,
ReviewerReadOnly), ServiceAdmin, the one way they write (a small form whose submit calls
one service), and InputFilter (a sidebar filter with a text box)."""

from dataclasses import dataclass, field
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.contrib.admin import helpers
from django.contrib.admin.utils import quote, unquote
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils.html import format_html
from django.utils.text import capfirst

from core.actors import Actor, is_admin, is_reviewer
from core.exceptions import DomainError, NotFound


class AdminOnly:
    """Screens for admins alone, by role, not by Django's per-model grants (tokens,
    webhooks and their deliveries, rules, routes, event sources and events, people)."""

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
    for name, texts in details.items():
        if name in form.fields and isinstance(texts, list):
            for message in texts:
                form.add_error(name, str(message))
            placed = True
    if not placed:
        form.add_error(None, exc.message)


@dataclass(frozen=True)
class ShownOnce:
    """What `ServiceAdmin.add` returns to show something exactly once (a raw token, a
    generated secret) instead of going back to the list: a template and its context,
    rendered with Cache-Control: no-store. Nothing on it is stored to be shown again."""

    template: str
    context: dict[str, Any] = field(default_factory=dict)


class ServiceAdmin(AdminOnly, admin.ModelAdmin):
    """The one way the console writes (admins only): every write is one service call.

    - add: `add_form`, then `add(actor, data)`, which returns the success message (back to
      the list) or a `ShownOnce` page;
    - change, optional: with a `change_form`, `change_initial(obj)` fills it and
      `change(actor, obj, data)` saves it (returns the message); without one the object
      page is the stock read-only view;
    - remove: the stock confirmation (listing only the chosen objects: what else goes is
      the service's business), then `remove(actor, obj)` for each. Admins that never
      remove deny `has_delete_permission`.

    A service's refusal (DomainError) comes back as form errors, on the page it came from.
    No ModelForm saves anything here.
    """

    show_facets = admin.ShowFacets.NEVER
    add_form: type[forms.Form]
    change_form: type[forms.Form] | None = None

    def has_add_permission(self, request: HttpRequest) -> bool:
        return is_admin(request.user)

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return self.change_form is not None and is_admin(request.user)

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return is_admin(request.user)

    # --- what subclasses provide ------------------------------------------------------

    def add(self, actor: Actor, data: dict[str, Any]) -> str | ShownOnce:
        raise NotImplementedError

    def add_context(self, form: forms.Form, error: DomainError | None) -> dict[str, Any]:
        """The add page's title, submit label and extras (`error`: the service's refusal)."""
        return {}

    def change_initial(self, obj: Any) -> dict[str, Any]:
        return {}

    def change(self, actor: Actor, obj: Any, data: dict[str, Any]) -> str:
        raise NotImplementedError

    def change_context(self, obj: Any) -> dict[str, Any]:
        """The change page's title, submit label and `facts` (read-only (label, value) pairs)."""
        return {"title": f"Change {self.opts.verbose_name}", "submit_label": "Save"}

    def remove(self, actor: Actor, obj: Any) -> None:
        raise NotImplementedError

    # --- pages --------------------------------------------------------------------------

    def changelist_url(self) -> str:
        opts = self.opts
        return reverse(
            f"admin:{opts.app_label}_{opts.model_name}_changelist",
            current_app=self.admin_site.name,
        )

    def page_context(self, request: HttpRequest, **extra: Any) -> dict[str, Any]:
        return {
            **self.admin_site.each_context(request),
            "opts": self.opts,
            "app_label": self.opts.app_label,
            "changelist_url": self.changelist_url(),
            **extra,
        }

    def form_page(
        self, request: HttpRequest, form: forms.Form, template: str = "", **extra: Any
    ) -> TemplateResponse:
        # `adminform` as the stock pages have it, for whatever reads the form from there
        # (AdminForm takes any form; the stubs say ModelForm).
        fieldsets = [(None, {"fields": list(form.fields)})]
        adminform = helpers.AdminForm(form, fieldsets, {})  # type: ignore[arg-type]
        context = self.page_context(request, form=form, adminform=adminform, **extra)
        return TemplateResponse(request, template or "admin/breakpoints/service_form.html", context)

    def shown_once(self, request: HttpRequest, page: ShownOnce) -> TemplateResponse:
        response = TemplateResponse(
            request, page.template, self.page_context(request, **page.context)
        )
        response["Cache-Control"] = "no-store"
        return response

    def add_view(self, request: HttpRequest, form_url: str = "", extra_context=None):
        if not self.has_add_permission(request):
            raise PermissionDenied
        form = self.add_form(request.POST if request.method == "POST" else None)
        if form.is_bound and form.is_valid():
            try:
                outcome = self.add(Actor.for_user(request.user), form.cleaned_data)
            except DomainError as exc:
                add_service_error(form, exc)
                return self.form_page(request, form, **self.add_context(form, exc))
            if isinstance(outcome, ShownOnce):
                return self.shown_once(request, outcome)
            self.message_user(request, outcome, messages.SUCCESS)
            return HttpResponseRedirect(self.changelist_url())
        return self.form_page(request, form, **self.add_context(form, None))

    def change_view(self, request: HttpRequest, object_id: str, form_url="", extra_context=None):
        if self.change_form is None:
            return super().change_view(request, object_id, form_url, extra_context)
        obj = self.get_object(request, unquote(object_id))
        if obj is None:  # gone, or out of get_queryset (e.g. removed): as the stock view does
            name, key = capfirst(self.opts.verbose_name), unquote(object_id)
            message = f"{name} with ID “{key}” doesn’t exist. Perhaps it was deleted?"
            self.message_user(request, message, messages.WARNING)
            return HttpResponseRedirect(reverse("admin:index", current_app=self.admin_site.name))
        if not self.has_change_permission(request, obj):
            raise PermissionDenied
        data = request.POST if request.method == "POST" else None
        form = self.change_form(data, initial=self.change_initial(obj))
        if form.is_bound and form.is_valid():
            try:
                message = self.change(Actor.for_user(request.user), obj, form.cleaned_data)
            except DomainError as exc:
                add_service_error(form, exc)
            else:
                self.message_user(request, message, messages.SUCCESS)
                return HttpResponseRedirect(self.changelist_url())
        delete_url = None
        if self.has_delete_permission(request, obj):
            delete_url = reverse(
                f"admin:{self.opts.app_label}_{self.opts.model_name}_delete",
                args=[quote(obj.pk)],
                current_app=self.admin_site.name,
            )
        return self.form_page(
            request, form, original=obj, delete_url=delete_url, **self.change_context(obj)
        )

    # --- removal ------------------------------------------------------------------------

    def get_deleted_objects(self, objs, request):
        # remove() is a service call, not a cascade: list only the chosen objects, and ask
        # for no per-model delete rights on what the collector would have guessed.
        chosen = list(objs)
        listed = [format_html("{}: {}", capfirst(self.opts.verbose_name), obj) for obj in chosen]
        return listed, {self.opts.verbose_name_plural: len(chosen)}, set(), []

    def delete_model(self, request: HttpRequest, obj: Any) -> None:
        try:
            self.remove(Actor.for_user(request.user), obj)
        except NotFound:
            pass  # removed meanwhile: the outcome the admin asked for
        except DomainError as exc:
            self.message_user(request, exc.message, messages.ERROR)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet) -> None:
        for obj in queryset:
            self.delete_model(request, obj)


class InputFilter(admin.SimpleListFilter):
    """A sidebar filter with a text box (for values too many to list: tags, agents)."""

    template = "admin/breakpoints/input_filter.html"

    def lookups(self, request, model_admin):
        return ()

    def has_output(self) -> bool:
        return True

    def choices(self, changelist):
        # Every other current parameter rides along as a hidden field, so filters combine.
        yield {
            "value": self.value() or "",
            "parameter_name": self.parameter_name,
            "clear_query_string": changelist.get_query_string(remove=[self.parameter_name]),
            "hidden_params": [
                (key, value)
                for key, value in changelist.params.items()
                if key != self.parameter_name
            ],
        }

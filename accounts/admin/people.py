"""People in the console: superusers keep the stock user admin, admins give product roles.

An admin (not a superuser) sees and edits only the people `people_manageable_by` allows
(never a superuser, another admin or themself): name, email, active, password reset, a
role (reviewer or none) and expert groups. The form has no superuser, staff, group or
permission field, so a crafted POST of those is ignored; role and groups are written
by the services in accounts.people, which apply the same rule again.
"""

from typing import Any

from django import forms
from django.contrib import admin
from django.contrib.auth import get_user_model
from django.contrib.auth.admin import UserAdmin
from django.contrib.auth.forms import AdminUserCreationForm, UserChangeForm
from django.contrib.auth.models import Group
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import Http404, HttpRequest

from accounts.people import (
    Role,
    account_names_problem,
    expert_groups_assignable,
    people_manageable_by,
    person_role,
    person_set_expert_groups,
    person_set_role,
)
from core.actors import Actor, actor_for_request_user, is_superuser
from core.exceptions import DomainError
from core.limits import MAX_GROUP_NAME_LENGTH

User = get_user_model()


class OnePersonNames(forms.ModelForm):
    """A username or email another account has (without case) is refused when it is given
    or changed (accounts.people.account_names_problem): one person, one account. Names
    already shared (legacy data) do not stop other changes."""

    def clean(self) -> dict[str, Any] | None:
        cleaned = super().clean() or self.cleaned_data
        changed = set(self.changed_data) & {"username", "email"}
        if changed:
            given = {field: (cleaned.get(field) or "") for field in changed}
            problems = account_names_problem(
                username=given.get("username", ""),
                email=given.get("email", ""),
                exclude_pk=self.instance.pk,
            )
            for field, problem in problems.items():
                if field in self.fields:
                    self.add_error(field, problem)
        return cleaned


class PersonCreationForm(OnePersonNames, AdminUserCreationForm):
    """The stock add form, refusing a username another account has without case."""


class PersonChangeForm(OnePersonNames, UserChangeForm):
    """The stock change form (superusers), refusing another account's username or email."""


class PersonForm(OnePersonNames, UserChangeForm):
    """What an admin may change about a person: the product's roles, no raw grants."""

    role = forms.ChoiceField(
        choices=[(Role.REVIEWER, Role.REVIEWER.label), (Role.NONE, Role.NONE.label)],
        help_text="Reviewers open the console, read, comment and release. "
        "Only a superuser makes an admin.",
    )
    expert_groups = forms.ModelMultipleChoiceField(
        queryset=expert_groups_assignable().order_by("name"),
        required=False,
        widget=forms.CheckboxSelectMultiple,
        help_text="The groups payload.expert routes breakpoints to.",
    )
    new_expert_groups = forms.CharField(
        required=False,
        max_length=1000,
        help_text="Comma-separated names of expert groups to create and join.",
    )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if self.instance.pk:
            self.fields["role"].initial = person_role(self.instance)
            self.fields["expert_groups"].initial = list(
                self.instance.groups.filter(
                    pk__in=expert_groups_assignable().values("pk")
                ).values_list("pk", flat=True)
            )

    def clean_new_expert_groups(self) -> list[str]:
        names = [name.strip() for name in self.cleaned_data["new_expert_groups"].split(",")]
        names = [name for name in names if name]
        if any(len(name) > MAX_GROUP_NAME_LENGTH for name in names):
            raise forms.ValidationError(
                f"A group name has at most {MAX_GROUP_NAME_LENGTH} characters."
            )
        not_expert = Group.objects.filter(name__in=names).exclude(
            pk__in=expert_groups_assignable().values("pk")
        )
        if not_expert:
            raise forms.ValidationError(
                "Not expert groups (a role, or a group with permissions): "
                + ", ".join(sorted(group.name for group in not_expert))
            )
        return names


PERSON_FIELDSETS = (
    (None, {"fields": ("username", "password")}),
    ("Personal info", {"fields": ("first_name", "last_name", "email")}),
    ("Role", {"fields": ("role", "expert_groups", "new_expert_groups", "is_active")}),
    ("Important dates", {"fields": ("last_login", "date_joined")}),
)


admin.site.unregister(User)


@admin.register(User)
class PersonAdmin(UserAdmin):
    """The stock UserAdmin for superusers; the role form, on fewer people, for admins.
    Every form refuses another account's username or email (without case)."""

    form = PersonChangeForm
    add_form = PersonCreationForm

    def _actor(self, request: HttpRequest) -> Actor:
        return actor_for_request_user(request.user)

    def get_queryset(self, request: HttpRequest) -> QuerySet:
        qs = super().get_queryset(request)
        return people_manageable_by(actor=self._actor(request), queryset=qs)

    def get_object(self, request: HttpRequest, object_id: str, from_field: str | None = None):
        # Someone an admin may not manage answers 404, exactly like nobody at all (the
        # stock answer, a redirect to the index, would hide the refusal from tests/live/clients).
        obj = super().get_object(request, object_id, from_field)
        if obj is None and not is_superuser(request.user):
            raise Http404("No such person.")
        return obj

    def get_fieldsets(self, request: HttpRequest, obj: Any = None):
        if obj is None or is_superuser(request.user):
            return super().get_fieldsets(request, obj)
        return PERSON_FIELDSETS

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None):
        if obj is None or is_superuser(request.user):
            return super().get_readonly_fields(request, obj)
        return ("username", "last_login", "date_joined")

    def get_form(self, request: HttpRequest, obj: Any = None, change: bool = False, **kwargs: Any):
        if obj is not None and not is_superuser(request.user):
            kwargs["form"] = PersonForm
        return super().get_form(request, obj, change=change, **kwargs)

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        # Admins deactivate people; deleting is for superusers.
        return is_superuser(request.user)

    def save_related(self, request: HttpRequest, form: Any, formsets: Any, change: bool) -> None:
        super().save_related(request, form, formsets, change)
        if not isinstance(form, PersonForm):
            return
        actor = self._actor(request)
        try:
            person_set_role(actor=actor, user=form.instance, role=form.cleaned_data["role"])
            person_set_expert_groups(
                actor=actor,
                user=form.instance,
                groups=form.cleaned_data["expert_groups"],
                new_names=form.cleaned_data["new_expert_groups"],
            )
        except DomainError as exc:
            # The change view's transaction rolls back with it: nothing of the POST lands.
            raise PermissionDenied(exc.message) from exc
